/**
 * Group commits for Deno KV: every durable write of the gateway goes through
 * one `GroupCommitter`, which packs the writes of many requests into few
 * atomic commits so the hot path never pays one fsync per request.
 *
 * Policy (see the performance spec): when no commit is in flight, a write is
 * committed at once (on the next microtask, so a synchronous burst still
 * shares it, and nothing waits on a timer); writes that arrive while a commit
 * is in flight are grouped into the next commit. Batches are split to stay
 * inside Deno KV's atomic limits, transient SQLite lock errors are retried
 * with short random backoff, and `write()` resolves only once its ops are
 * durably committed.
 *
 * Negative sums: Deno KV `sum` on a `Deno.KvU64` wraps modulo 2^64, so a
 * `sum` op with value `-d` is encoded as adding `2^64 - d`, which subtracts
 * `d`. Callers must only do this when the true result stays >= 0 (for example
 * refunding part of an amount they added earlier to the same key); otherwise
 * the stored value wraps to a huge number.
 */

import { retryTransient } from "./transient.ts";
import type { DeferredPlan, DeferredSums } from "./deferred_sums.ts";
import {
  applyWrites,
  asSum,
  coalesceSums,
  KV_LIMITS,
  type KvWrite,
  type Sized,
  sizeOp,
} from "./kv_writes.ts";

export { applyWrites, coalesceSums, KV_LIMITS, type KvWrite };

/** The only part of `Deno.Kv` the committer uses (lets tests wrap it). */
export type KvAtomicSource = Pick<Deno.Kv, "atomic">;

export interface GroupCommitterOptions {
  /** Mutations per atomic commit; at most Deno KV's limit (1000). */
  maxBatchMutations?: number;
  /** Told about permanent commit failures (never given op values). */
  onError?: (e: unknown) => void;
  /** Called after each applied commit with its mutation count, and before each retry (metrics). */
  onCommit?: (mutations: number) => void;
  onRetry?: () => void;
  /** Called once writes became durable: after each own commit, and after a borrowing commit settled. */
  onDurable?: () => void;
  /** Uniform [0, 1) source for backoff jitter. */
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** Attempts per commit before a transient error counts as permanent. */
  maxAttempts?: number;
  /**
   * A key every commit checks is absent (the replica's hold fence, admission/holds.ts);
   * once it exists every commit fails with `fenced()`'s error, never retried.
   */
  fence?: { key: Deno.KvKey; error: () => Error };
  /**
   * This replica's deferred sums (store/deferred_sums.ts): `defer` ops go into
   * its pending row, applied with a later commit, or by an idle flush once
   * they are `flushMs` old; `close` applies them and deletes the row. Without
   * it a `defer` is a plain `sum`.
   */
  deferred?: DeferredSums;
}

const BATCH_TOTAL_BYTES = 600_000;
const BATCH_KEY_BYTES = 60_000;
const DEFAULT_MAX_MUTATIONS = 900;
interface Pending {
  ops: Sized[];
  resolve: () => void;
  reject: (e: unknown) => void;
}

/** Characters that are not one UTF-8 byte each, or need escaping (NUL). */

/** Writers whose ops already failed (a split writer's later parts are skipped). */
const failed = new WeakSet<Pending>();

function defaultSleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Packs concurrent writers' ops into few atomic Deno KV commits. */
export class GroupCommitter {
  readonly #kv: KvAtomicSource;
  readonly #maxMutations: number;
  readonly #onError: (e: unknown) => void;
  readonly #onCommit?: (mutations: number) => void;
  readonly #onRetry?: () => void;
  readonly #onDurable?: () => void;
  readonly #random: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #maxAttempts: number;
  readonly #fence: GroupCommitterOptions["fence"];
  readonly #deferred: DeferredSums | undefined;
  /** The idle flush of the deferred sums, armed while deltas wait in the row. */
  #idleFlush: ReturnType<typeof setTimeout> | null = null;
  #queue: Pending[] = [];
  #running = false;
  /** Writers handed to another commit (`borrow`) and not yet settled. */
  #borrowed = 0;
  #closed = false;
  #idleWaiters: (() => void)[] = [];
  /** A commit of this committer is being written. */
  #inFlight = false;
  /** An `exclusive` section (another writer's commit) holds the lane. */
  #laneHeld = false;
  /** Exclusive sections waiting for the lane (they go before this committer's next commit). */
  #wanting = 0;
  #laneWaiters: (() => void)[] = [];

  constructor(kv: KvAtomicSource, opts: GroupCommitterOptions = {}) {
    const max = opts.maxBatchMutations ?? DEFAULT_MAX_MUTATIONS;
    if (!Number.isInteger(max) || max < 1 || max > KV_LIMITS.mutations) {
      throw new RangeError(`maxBatchMutations must be an integer in 1..${KV_LIMITS.mutations}`);
    }
    const attempts = opts.maxAttempts ?? 50;
    if (!Number.isInteger(attempts) || attempts < 1) {
      throw new RangeError("maxAttempts must be a positive integer");
    }
    this.#kv = kv;
    this.#maxMutations = max;
    this.#onError = opts.onError ?? (() => {});
    this.#onCommit = opts.onCommit;
    this.#onRetry = opts.onRetry;
    this.#onDurable = opts.onDurable;
    this.#random = opts.random ?? Math.random;
    this.#sleep = opts.sleep ?? defaultSleep;
    this.#maxAttempts = attempts;
    this.#fence = opts.fence;
    this.#deferred = opts.deferred;
  }

  /**
   * Queues `ops` and resolves once they are durably committed. The ops of one
   * call land in one atomic commit whenever they fit one commit's limits; a
   * single call larger than that is split over consecutive commits (and is
   * then not atomic as a whole).
   */
  write(ops: KvWrite[]): Promise<void> {
    if (this.#closed) return Promise.reject(new Error("GroupCommitter is closed"));
    let sized: Sized[];
    try {
      sized = ops.map(sizeOp);
    } catch (e) {
      return Promise.reject(e);
    }
    if (sized.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ ops: sized, resolve, reject });
      if (!this.#running) {
        this.#running = true;
        // A microtask, not a timer: same-tick writers share the commit, and
        // nobody waits for a clock.
        queueMicrotask(() => void this.#drain());
      }
    });
  }

  /** Resolves once every write queued before this call has settled. */
  flush(): Promise<void> {
    if (!this.#running && this.#borrowed === 0) return Promise.resolve();
    return new Promise((r) => this.#idleWaiters.push(r));
  }

  /**
   * Hands whole queued writers (within the given mutation and byte budgets) to
   * another atomic commit that is about to happen anyway, e.g. an admission
   * commit: under load, queued receipts then ride the next commit instead of
   * waiting for this committer's own. `settle(true)` after that commit is
   * durable resolves them; `settle(false)` puts them back in front of the queue.
   */
  borrow(maxMutations: number, maxBytes: number): BorrowedWrites | null {
    const taken: Pending[] = [];
    let mutations = 0;
    let bytes = 0;
    while (this.#queue.length > 0) {
      const p = this.#queue[0];
      const pb = p.ops.reduce((a, o) => a + o.bytes, 0);
      if (mutations + p.ops.length > maxMutations || bytes + pb > maxBytes) break;
      this.#queue.shift();
      taken.push(p);
      mutations += p.ops.length;
      bytes += pb;
    }
    if (taken.length === 0) return null;
    this.#borrowed += taken.length;
    let settled = false;
    return {
      // Another commit knows nothing of the pending row: its deferred sums are applied now.
      ops: coalesceSums(taken.flatMap((p) => p.ops.map((o) => asSum(o.op)))),
      settle: (ok) => {
        if (settled) return;
        settled = true;
        this.#borrowed -= taken.length;
        if (ok) {
          this.#onDurable?.();
          for (const p of taken) p.resolve();
        } else {
          this.#queue.unshift(...taken);
          if (!this.#running) {
            this.#running = true;
            queueMicrotask(() => void this.#drain());
          }
        }
        this.#notifyIdle();
      },
    };
  }

  /**
   * Runs `f` (another writer's commit on the same store, e.g. an admission)
   * while no commit of this committer is in flight, and starts none until `f`
   * settles. SQLite writes one transaction at a time anyway, so two commits in
   * flight only cost two fsyncs; taking turns lets `f` carry the writes queued
   * meanwhile (`borrow`), and this committer's next commit carry the rest.
   * `f` must not wait for this committer's own writes (they would wait for `f`).
   */
  async exclusive<T>(f: () => Promise<T>): Promise<T> {
    if (this.#inFlight || this.#laneHeld) {
      this.#wanting++;
      try {
        while (this.#inFlight || this.#laneHeld) {
          await new Promise<void>((r) => this.#laneWaiters.push(r));
        }
      } finally {
        this.#wanting--;
      }
    }
    this.#laneHeld = true;
    try {
      return await f();
    } finally {
      this.#laneHeld = false;
      this.#wakeLane();
    }
  }

  /** Resolves when no commit of this committer is in flight (for batching behind it). */
  laneFree(): Promise<void> {
    if (!this.#inFlight) return Promise.resolve();
    return new Promise<void>((r) => this.#laneWaiters.push(r));
  }

  #wakeLane(): void {
    const waiters = this.#laneWaiters;
    this.#laneWaiters = [];
    for (const w of waiters) w();
  }

  #notifyIdle(): void {
    if (this.#running || this.#borrowed > 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }

  /** Flushes, then refuses new writes; applies the deferred sums and deletes their row. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#idleFlush !== null) clearTimeout(this.#idleFlush);
    this.#idleFlush = null;
    await this.flush();
    const d = this.#deferred;
    if (d === undefined) return;
    try {
      // Planned inside the lane: an idle flush in flight must land (and empty the row) first.
      await this.exclusive(async () => {
        const plan = d.closing();
        if (plan.writes.length > 0) await this.#commitOps(plan.writes, plan);
      });
    } catch (e) {
      // Left in the row: whoever recovers this replica applies it (admission/holds.ts).
      this.#onError(e);
    }
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      // A waiting exclusive section goes first: it takes the queue with it.
      if (this.#laneHeld || this.#wanting > 0) {
        await new Promise<void>((r) => this.#laneWaiters.push(r));
        continue;
      }
      const batch = this.#queue;
      this.#queue = [];
      this.#inFlight = true;
      try {
        for (const chunk of this.#chunks(batch)) await this.#commitChunk(chunk);
      } finally {
        this.#inFlight = false;
        this.#wakeLane();
      }
      // Let what was just woken (sections, admissions batching behind this
      // commit) take the lane before this committer commits again.
      await Promise.resolve();
    }
    this.#running = false;
    this.#notifyIdle();
  }

  /** Cuts a batch into commits within the limits, keeping each writer whole if it fits. */
  *#chunks(batch: Pending[]): Generator<Chunk> {
    let cur = new Chunk();
    for (const p of batch) {
      const parts = this.#splitWriter(p);
      for (const part of parts) {
        if (!cur.fits(part.ops, this.#maxMutations)) {
          if (!cur.empty) yield cur;
          cur = new Chunk();
        }
        cur.add(part);
      }
    }
    if (!cur.empty) yield cur;
  }

  /** A writer larger than one commit becomes several parts sharing one promise. */
  #splitWriter(p: Pending): Part[] {
    const probe = new Chunk();
    if (probe.fits(p.ops, this.#maxMutations)) {
      return [{ ops: p.ops, owner: p, last: true }];
    }
    const parts: Part[] = [];
    let cur: Part = { ops: [], owner: p, last: false };
    let room = new Chunk();
    for (const op of p.ops) {
      if (!room.fits([op], this.#maxMutations)) {
        parts.push(cur);
        cur = { ops: [], owner: p, last: false };
        room = new Chunk();
      }
      cur.ops.push(op);
      room.add({ ops: [op], owner: p, last: false });
    }
    cur.last = true;
    parts.push(cur);
    return parts;
  }

  async #commitChunk(chunk: Chunk): Promise<void> {
    const live = chunk.parts.filter((part) => !failed.has(part.owner));
    if (live.length === 0) return;
    try {
      await this.#commitWithRetry(live.flatMap((part) => part.ops));
      for (const part of live) if (part.last) part.owner.resolve();
    } catch (e) {
      if (live.length === 1 || new Set(live.map((p) => p.owner)).size === 1) {
        this.#fail(live[0].owner, e);
        return;
      }
      // One bad writer must not sink the others' receipts: the failed commit
      // wrote nothing, so commit each writer's part alone to isolate it.
      for (const part of live) {
        if (failed.has(part.owner)) continue;
        try {
          await this.#commitWithRetry(part.ops);
          if (part.last) part.owner.resolve();
        } catch (e2) {
          this.#fail(part.owner, e2);
        }
      }
    }
  }

  #fail(owner: Pending, e: unknown): void {
    failed.add(owner);
    this.#onError(e);
    owner.reject(e);
  }

  async #commitWithRetry(sized: Sized[]): Promise<void> {
    const all = coalesceSums(sized.map((s) => s.op));
    const d = this.#deferred;
    if (d === undefined) return await this.#commitOps(all);
    const ops: KvWrite[] = [];
    const defers: KvWrite[] = [];
    for (const o of all) (o.op === "defer" ? defers : ops).push(o);
    if (defers.length === 0 && !d.due) return await this.#commitOps(ops);
    const plan = d.plan(defers, KV_LIMITS.mutations - ops.length);
    ops.push(...plan.writes);
    await this.#commitOps(ops, plan);
  }

  /** Applies the deferred sums when they waited `flushMs` with no commit to carry them. */
  #armIdleFlush(): void {
    const d = this.#deferred;
    if (d === undefined || !d.pending || this.#idleFlush !== null || this.#closed) return;
    const timer = setTimeout(() => {
      this.#idleFlush = null;
      if (!d.pending || this.#closed) return;
      if (!d.due) return this.#armIdleFlush();
      this.exclusive(async () => {
        const plan = d.plan([], KV_LIMITS.mutations, true);
        if (plan.writes.length > 0) await this.#commitOps(plan.writes, plan);
      }).catch((e) => this.#onError(e)).finally(() => this.#armIdleFlush());
    }, d.flushMs);
    this.#idleFlush = timer;
    // An idle process may exit meanwhile: the deltas are durable in the row.
    Deno.unrefTimer(timer);
  }

  /** One atomic commit of `ops` (fence-checked, retried); `plan` is told once it is durable. */
  async #commitOps(ops: KvWrite[], plan?: DeferredPlan): Promise<void> {
    if (ops.length === 0) return;
    await retryTransient(async () => {
      const atomic = this.#kv.atomic();
      if (this.#fence) atomic.check({ key: this.#fence.key, versionstamp: null });
      applyWrites(atomic, ops);
      const res = await atomic.commit();
      if (!res.ok) {
        throw this.#fence ? this.#fence.error() : new Error("KV commit was not applied");
      }
    }, {
      maxAttempts: this.#maxAttempts,
      random: this.#random,
      sleep: this.#sleep,
      onRetry: this.#onRetry,
    });
    plan?.done();
    this.#onCommit?.(ops.length);
    this.#onDurable?.();
    this.#armIdleFlush();
  }
}

/** Writers lent to another commit by {@link GroupCommitter.borrow}. */
export interface BorrowedWrites {
  ops: KvWrite[];
  settle(committed: boolean): void;
}

interface Part {
  ops: Sized[];
  owner: Pending;
  /** The owner resolves when its last part commits. */
  last: boolean;
}

class Chunk {
  parts: Part[] = [];
  mutations = 0;
  bytes = 0;
  keyBytes = 0;

  get empty(): boolean {
    return this.parts.length === 0;
  }

  fits(ops: Sized[], maxMutations: number): boolean {
    let m = this.mutations, b = this.bytes, k = this.keyBytes;
    for (const o of ops) {
      m++;
      b += o.bytes;
      k += o.keyBytes;
    }
    return m <= maxMutations && b <= BATCH_TOTAL_BYTES && k <= BATCH_KEY_BYTES;
  }

  add(part: Part): void {
    this.parts.push(part);
    for (const o of part.ops) {
      this.mutations++;
      this.bytes += o.bytes;
      this.keyBytes += o.keyBytes;
    }
  }
}
