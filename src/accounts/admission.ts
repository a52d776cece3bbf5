/**
 * The one admission entry point of the request path: rate limits and credit
 * reservation, decided together and committed in one atomic write.
 *
 * Exact under concurrency: concurrent `admit` calls of this process are
 * coalesced into batches; a batch reads every involved key's balance and
 * state, decides serially in memory, and commits one atomic that checks the
 * versionstamp of every balance and state it replaces. On a conflict (another
 * process, or a settlement landing) the whole batch is re-read and re-decided;
 * SQLite lock errors are retried with short random backoff. So N racing
 * requests against a limit of M admit exactly M, in one process or several
 * sharing one KV file.
 *
 * Settlement is not done here: `Admission.settlement(actual)` returns blind
 * writes for the caller to hand to the GroupCommitter with the request's
 * receipt. It returns the writes on its first call only (later calls return
 * `[]`), so settling one admission twice cannot double-debit. If committing
 * those writes fails, retry the same array rather than calling again.
 */

import { GatewayError } from "../http/errors.ts";
import type { KvWrite } from "../store/group_commit.ts";
import { applyWrites, type BorrowedWrites } from "../store/group_commit.ts";
import { backoffMs, isTransientKvError } from "../store/transient.ts";
import { creditSettlementWrites, decideCredit, foldDebt } from "./credits.ts";
import type { KeyRecord } from "./keys.ts";
import { holdClosedWrites, holdInstanceKey, holdKey } from "./holds.ts";
import {
  type AccountState,
  balanceKey,
  creditRefundKey,
  debtKey,
  parseState,
  reqRefundKey,
  stateKey,
  tokOverKey,
  tokRefundKey,
  u64,
} from "./kv_layout.ts";
import {
  type Lease,
  LEASE_IDLE_MS,
  LEASE_LIFETIME_MS,
  leaseReturnWrites,
  leaseSlice,
  mergeLease,
  takeFromLease,
  wantsRenewal,
} from "./leases.ts";
import {
  decideRate,
  foldTokens,
  limitsFor,
  rateHeaders,
  type Tiers,
  tokenSettlementWrites,
} from "./rate_limit.ts";

export interface AdmissionEstimate {
  /** Estimated prompt + completion tokens. */
  tokens: number;
  /** Estimated cost to reserve, nano-credits. */
  costNano: bigint;
  requestId: string;
}

export interface ActualUsage {
  promptTokens: number;
  completionTokens: number;
  costNano: bigint;
}

export interface Admission {
  /** X-RateLimit-* headers for the response. */
  headers: Record<string, string>;
  /** Blind writes settling this request (first call only; later calls return []). */
  settlement(actual: ActualUsage): KvWrite[];
}

export interface Admitter {
  admit(key: KeyRecord, est: AdmissionEstimate): Promise<Admission>;
  /** Hands back every quota lease (durably) and stops leasing. */
  close(): Promise<void>;
}

export interface AdmitterOptions {
  tiers: Tiers;
  now: () => number;
  /**
   * The group committer on the same store: admission commits take turns with
   * its commits and carry the writes queued behind them.
   */
  piggyback?: CommitLane;
  /**
   * Whether this process is the only live replica on the store. Quota leases
   * (see leases.ts) are taken only then, and only with `piggyback` set: with
   * several replicas one's unused lease could refuse another's request.
   */
  soleReplica?: () => Promise<boolean>;
  /**
   * This process's replica id: with it, every reservation and its settlement
   * are recorded in the hold ledger (holds.ts), so a crash loses no credits.
   */
  holdInstance?: string;
  /** Most requests' worth in one lease slice (`store.lease_max_requests`). */
  leaseMaxRequests?: number;
  /** Monotonic milliseconds for lease lifetimes (durations, not the wall clock). */
  monotonic?: () => number;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /**
   * Distinct keys per batch. Each key costs 2 checks (KV max 100) and 5 reads
   * (one `getMany` of at most 10 keys per 2 API keys, so each key's entries
   * come from one snapshot).
   */
  maxKeysPerBatch?: number;
  /** Commit attempts per batch before giving up with 503. */
  maxAttempts?: number;
}

/** What admission needs of the group committer (see `GroupCommitter.exclusive`). */
export interface CommitLane {
  write(ops: KvWrite[]): Promise<void>;
  borrow(maxMutations: number, maxBytes: number): BorrowedWrites | null;
  exclusive<T>(f: () => Promise<T>): Promise<T>;
  laneFree(): Promise<void>;
}

/** The KV operations admission needs (lets tests inject lock errors). */
export type AdmissionKv = Pick<Deno.Kv, "getMany" | "atomic">;

interface Pending {
  key: KeyRecord;
  est: AdmissionEstimate;
  /** A background lease renewal (sized on `est`), not a request: nothing is admitted. */
  renewal?: true;
  /** Renewals resolve with null. */
  resolve: (a: Admission | null) => void;
  reject: (e: unknown) => void;
}

/** Room left in an admission commit for borrowed writes (KV allows 1000 mutations, 800 KB). */
const PIGGYBACK_MUTATIONS = 600;
const PIGGYBACK_BYTES = 400_000;

/** How long read account entries may be reused (the counters in them can only lag). */
const CACHE_MS = 500;

/**
 * Near a limit, decisions must see every settlement: fewer than four more
 * requests of this size fit in the token bucket or in the balance.
 */
function nearLimit(
  tok: number,
  tpm: number,
  estTokens: number,
  balance: bigint,
  costNano: bigint,
): boolean {
  return tpm - tok < 4 * estTokens || balance < 4n * costNano || balance <= 0n;
}

function validate(est: AdmissionEstimate): void {
  if (!Number.isSafeInteger(est.tokens) || est.tokens < 0) {
    throw new RangeError("estimated tokens must be a non-negative integer");
  }
  if (est.costNano < 0n) throw new RangeError("estimated cost must be non-negative");
  if (est.requestId === "") throw new RangeError("requestId is required");
}

function validateActual(a: ActualUsage): void {
  for (const n of [a.promptTokens, a.completionTokens]) {
    if (!Number.isSafeInteger(n) || n < 0) {
      throw new RangeError("token counts must be non-negative integers");
    }
  }
  if (a.costNano < 0n) throw new RangeError("actual cost must be non-negative");
}

export function createAdmitter(kv: AdmissionKv, opts: AdmitterOptions): Admitter {
  const maxKeys = opts.maxKeysPerBatch ?? 20;
  if (!Number.isInteger(maxKeys) || maxKeys < 1 || maxKeys > 50) {
    throw new RangeError("maxKeysPerBatch must be an integer in 1..50");
  }
  const maxAttempts = opts.maxAttempts ?? 200;
  const random = opts.random ?? Math.random;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let queue: Pending[] = [];
  let running = false;
  const mono = opts.monotonic ?? (() => performance.now());
  const leasing = opts.piggyback !== undefined && opts.soleReplica !== undefined;
  const inst = opts.holdInstance;
  /** Whether this instance's ledger entry is known to be written. */
  let registered = false;
  /** A lease's hand-back: its unused part, and the hold it closes. */
  const returnWrites = (id: string, l: Lease): KvWrite[] => [
    ...leaseReturnWrites(id, l),
    ...(inst === undefined ? [] : holdClosedWrites(inst, id, l.credit)),
  ];
  /** Live leases by key id; a key's lease is detached while a batch folds it back. */
  const leases = new Map<string, Lease>();
  const detached = new Map<string, Lease>();
  /**
   * Leases whose renewal was asked for: one try per slice (a merge clears it), so a
   * renewal that grants nothing near a limit is not asked again on every request.
   */
  const renewAsked = new WeakSet<Lease>();
  let sweeper: ReturnType<typeof setInterval> | undefined;
  let closed = false;

  /** Returns leases that went idle, got old, or outlived the sole-replica condition. */
  async function sweep(all: boolean): Promise<void> {
    const sole = all || leases.size === 0 ? false : await opts.soleReplica!().catch(() => false);
    const t = mono();
    const writes: KvWrite[] = [];
    for (const [id, l] of leases) {
      const stale = t - l.lastUse >= LEASE_IDLE_MS || t - l.grantedAt >= LEASE_LIFETIME_MS;
      if (all || !sole || stale) {
        leases.delete(id);
        writes.push(...returnWrites(id, l));
      }
    }
    if (leases.size === 0 && sweeper !== undefined) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
    // A failed return leaves the slice reserved in the store (it never
    // over-admits); the committer reports the failure.
    if (writes.length > 0) await opts.piggyback!.write(writes);
  }

  function installLease(id: string, l: Lease): void {
    if (closed) {
      // After close (a batch that failed late): hand the slice back, start no timer.
      void opts.piggyback!.write(returnWrites(id, l)).catch(() => {});
      return;
    }
    leases.set(id, l);
    sweeper ??= setInterval(() => void sweep(false).catch(() => {}), LEASE_IDLE_MS / 2);
  }

  function makeAdmission(
    key: KeyRecord,
    est: AdmissionEstimate,
    headers: Record<string, string>,
  ): Admission {
    let settled = false;
    return {
      headers,
      settlement(actual) {
        validateActual(actual);
        if (settled) return [];
        settled = true;
        return [
          ...(inst === undefined ? [] : holdClosedWrites(inst, key.key_id, est.costNano)),
          ...creditSettlementWrites(key.key_id, est.costNano, actual),
          ...tokenSettlementWrites(
            key.key_id,
            est.tokens,
            actual.promptTokens + actual.completionTokens,
          ),
        ];
      },
    };
  }

  /** Takes queued requests touching at most `maxKeys` distinct keys, in order. */
  function takeBatch(): Pending[] {
    const keys = new Set<string>();
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    for (const p of queue) {
      if (keys.has(p.key.key_id) || keys.size < maxKeys) {
        keys.add(p.key.key_id);
        batch.push(p);
      } else {
        rest.push(p);
      }
    }
    queue = rest;
    return batch;
  }

  /**
   * The entries of each account, per KV read (a `getMany` takes at most 10
   * keys, so one account's 6 entries per call keeps them one consistent read).
   */
  async function readAll(keyIds: string[]): Promise<Map<string, Deno.KvEntryMaybe<unknown>[]>> {
    const results = await Promise.all(keyIds.map((id) =>
      kv.getMany([
        balanceKey(id),
        stateKey(id),
        debtKey(id),
        tokRefundKey(id),
        tokOverKey(id),
        creditRefundKey(id),
        reqRefundKey(id),
      ])
    ));
    const t = opts.now();
    const out = new Map<string, Deno.KvEntryMaybe<unknown>[]>();
    keyIds.forEach((id, i) => {
      out.set(id, results[i]);
      cache.set(id, { entries: results[i], at: t });
    });
    return out;
  }

  /**
   * Recently read (or written) account entries. Settlements only ever add to
   * the separate counters (refunds, overruns, debt), never to the two checked
   * entries, so a cached balance/state stays exact until another process
   * admits on the same key — which the versionstamp checks detect, forcing a
   * fresh read. Cached counters can only lag; admission uses them only when
   * the decision is far from every limit (see `nearLimit`).
   */
  const cache = new Map<string, { entries: Deno.KvEntryMaybe<unknown>[]; at: number }>();

  function cached(keyIds: string[]): Map<string, Deno.KvEntryMaybe<unknown>[]> | null {
    const t = opts.now();
    const out = new Map<string, Deno.KvEntryMaybe<unknown>[]>();
    for (const id of keyIds) {
      const c = cache.get(id);
      if (!c || t - c.at > CACHE_MS || t < c.at) return null;
      out.set(id, c.entries);
    }
    return out;
  }

  type Outcome = { ok: true; admission: Admission | null } | { ok: false; error: GatewayError };

  /**
   * One read-decide-commit attempt; null when the commit lost a versionstamp
   * race. With `fresh` false it may decide from cached entries, and returns
   * "stale" when that decision would reject or land near a limit.
   */
  async function attempt(batch: Pending[], fresh: boolean): Promise<Outcome[] | null | "stale"> {
    const t = opts.now();
    const keyIds = [...new Set(batch.map((p) => p.key.key_id))];
    const keyOf = new Map(batch.map((p) => [p.key.key_id, p.key]));
    // Keys with a request in this batch (not only a renewal): their live lease is folded back.
    const requested = new Set(batch.filter((p) => !p.renewal).map((p) => p.key.key_id));
    const fromCache = fresh ? null : cached(keyIds);
    const entries = fromCache ?? await readAll(keyIds);
    interface Working {
      balance: bigint;
      state: AccountState;
      unpaid: bigint;
      /** Balance and state must be written (a request admitted, or a lease folded back). */
      admitted: boolean;
      /** The last admitted request's size, for sizing a new lease. */
      last: AdmissionEstimate | null;
      /** Credits this commit reserves (requests, slices) and hands back (folded leases). */
      held: bigint;
      released: bigint;
      entries: Deno.KvEntryMaybe<unknown>[];
    }
    const work = new Map<string, Working>();
    for (const id of keyIds) {
      // This key's live lease is folded back into the decision (exactly, in this commit).
      const live = requested.has(id) ? leases.get(id) : undefined;
      if (live) {
        leases.delete(id);
        detached.set(id, live);
      }
      const [b, s, d, r, o, cr, rr] = entries.get(id) ?? [];
      const state = foldTokens(
        parseState(s.value),
        limitsFor(keyOf.get(id)!, opts.tiers),
        t,
        u64(r.value),
        u64(o.value),
        u64(rr?.value),
      );
      const fold = foldDebt(state, u64(b.value), u64(d.value), u64(cr.value));
      const w: Working = {
        balance: fold.balance,
        state: fold.state,
        unpaid: fold.unpaid,
        admitted: false,
        last: null,
        held: 0n,
        released: 0n,
        entries: [b, s],
      };
      const back = detached.get(id);
      if (back) {
        w.balance += back.credit;
        w.released += back.credit;
        w.state = {
          ...w.state,
          req: Math.max(0, w.state.req - back.req),
          tok: Math.max(0, w.state.tok - back.tok),
        };
        w.admitted = true;
      }
      work.set(id, w);
    }
    const outcomes: Outcome[] = [];
    for (const p of batch) {
      const w = work.get(p.key.key_id);
      if (w === undefined) throw new Error("admission batch lost a key");
      const limits = limitsFor(p.key, opts.tiers);
      if (p.renewal) {
        // Only sizes a new slice (the live lease stays in use, and stays reserved).
        // From cached entries only far from every limit, as for a request.
        if (
          fromCache && nearLimit(w.state.tok, limits.tpm, p.est.tokens, w.balance, p.est.costNano)
        ) {
          return "stale";
        }
        w.last ??= p.est;
        outcomes.push({ ok: true, admission: null });
        continue;
      }
      const rate = decideRate(w.state, limits, p.est.tokens);
      if (!rate.ok) {
        if (fromCache) return "stale";
        outcomes.push(rate);
        continue;
      }
      const credit = decideCredit(
        { balance: w.balance, state: w.state, unpaid: w.unpaid },
        p.est.costNano,
      );
      if (!credit.ok) {
        if (fromCache) return "stale";
        outcomes.push(credit);
        continue;
      }
      // Cached counters may lag by a few settlements: decide from them only with
      // room for several more such requests on every limit.
      if (
        fromCache &&
        nearLimit(rate.state.tok, limits.tpm, p.est.tokens, credit.balance, p.est.costNano)
      ) {
        return "stale";
      }
      w.state = rate.state;
      w.balance = credit.balance;
      w.admitted = true;
      w.last = p.est;
      w.held += p.est.costNano;
      outcomes.push({ ok: true, admission: makeAdmission(p.key, p.est, rate.headers) });
    }
    // Far from every limit, reserve a slice for the next requests of the key.
    const granted = new Map<string, Lease>();
    if (leasing && !closed && [...work.values()].some((w) => w.last !== null)) {
      if (await opts.soleReplica!().catch(() => false)) {
        const tm = mono();
        for (const p of batch) {
          const w = work.get(p.key.key_id)!;
          if (w.last === null || granted.has(p.key.key_id) || w.unpaid > 0n) continue;
          const limits = limitsFor(p.key, opts.tiers);
          const slice = leaseSlice(
            { req: limits.rpm - w.state.req, tok: limits.tpm - w.state.tok, credit: w.balance },
            w.last.tokens,
            w.last.costNano,
            opts.leaseMaxRequests,
          );
          if (slice === null) continue;
          granted.set(p.key.key_id, {
            req: slice.req,
            tok: slice.tok,
            credit: slice.credit,
            shownReq: w.state.req,
            shownTok: w.state.tok,
            grantedAt: tm,
            lastUse: tm,
            size: slice,
          });
          w.state = { ...w.state, req: w.state.req + slice.req, tok: w.state.tok + slice.tok };
          w.balance -= slice.credit;
          w.held += slice.credit;
          w.admitted = true; // a renewal-only key writes its entries too
        }
      }
    }
    const atomic = kv.atomic();
    let writes = 0;
    for (const [id, w] of work) {
      if (!w.admitted) continue;
      const [b, s] = w.entries;
      atomic.check(b).check(s)
        .set(balanceKey(id), new Deno.KvU64(w.balance))
        .set(stateKey(id), w.state);
      if (inst !== undefined) {
        if (w.held > 0n) atomic.sum(holdKey(inst, id, "reserved"), w.held);
        if (w.released > 0n) atomic.sum(holdKey(inst, id, "closed"), w.released);
      }
      writes++;
    }
    if (inst !== undefined && !registered && writes > 0) {
      atomic.set(holdInstanceKey(inst), t);
    }
    if (writes === 0) return outcomes;
    const commit = async () => {
      // Queued blind writes (receipts, settlements) ride this commit when there is room.
      const lent = opts.piggyback?.borrow(PIGGYBACK_MUTATIONS, PIGGYBACK_BYTES) ?? null;
      if (lent) applyWrites(atomic, lent.ops);
      let r: Deno.KvCommitResult | Deno.KvCommitError;
      try {
        r = await atomic.commit();
      } catch (e) {
        lent?.settle(false);
        throw e;
      }
      lent?.settle(r.ok);
      return r;
    };
    const res = opts.piggyback ? await opts.piggyback.exclusive(commit) : await commit();
    if (!res.ok) {
      for (const id of keyIds) cache.delete(id);
      return null;
    }
    for (const id of keyIds) detached.delete(id);
    registered = true;
    for (const [id, l] of granted) {
      const live = leases.get(id); // only a renewal leaves the live lease in place
      if (live !== undefined) {
        mergeLease(live, l);
        renewAsked.delete(live);
        continue;
      }
      installLease(id, l);
    }
    // This commit wrote the checked entries: cache them as they now stand.
    for (const [id, w] of work) {
      if (!w.admitted) continue;
      const prev = entries.get(id)!;
      const next = [...prev];
      next[0] = {
        key: balanceKey(id),
        value: new Deno.KvU64(w.balance),
        versionstamp: res.versionstamp,
      };
      next[1] = { key: stateKey(id), value: w.state, versionstamp: res.versionstamp };
      cache.set(id, { entries: next, at: cache.get(id)?.at ?? t });
    }
    return outcomes;
  }

  /** A batch that never committed leaves its folded-back leases reserved: keep using them. */
  function restoreDetached(batch: Pending[]): void {
    for (const p of batch) {
      const l = detached.get(p.key.key_id);
      if (l === undefined) continue;
      detached.delete(p.key.key_id);
      if (!leases.has(p.key.key_id)) installLease(p.key.key_id, l);
    }
  }

  async function runBatch(batch: Pending[]): Promise<void> {
    let fresh = false;
    for (let n = 1;; n++) {
      let outcomes: Outcome[] | null | "stale";
      try {
        outcomes = await attempt(batch, fresh);
      } catch (e) {
        if (!isTransientKvError(e) || n >= maxAttempts) {
          restoreDetached(batch);
          for (const p of batch) p.reject(e);
          return;
        }
        await sleep(backoffMs(n, random));
        continue;
      }
      if (outcomes === "stale") {
        fresh = true;
        n--;
        continue;
      }
      // After a lost race the cache is gone; later attempts read afresh anyway.
      if (outcomes !== null) {
        outcomes.forEach((o, i) => o.ok ? batch[i].resolve(o.admission) : batch[i].reject(o.error));
        return;
      }
      if (n >= maxAttempts) {
        restoreDetached(batch);
        const err = new GatewayError("unavailable", "Account store is busy; retry shortly.");
        for (const p of batch) p.reject(err);
        return;
      }
      // First conflict: retry at once; repeated ones: jitter so racing
      // processes stop colliding.
      if (n > 1) await sleep(backoffMs(n - 1, random));
    }
  }

  async function drain(): Promise<void> {
    try {
      while (queue.length > 0) {
        // Behind an in-flight commit: let more requests join this batch meanwhile.
        await opts.piggyback?.laneFree();
        await runBatch(takeBatch());
      }
    } finally {
      running = false;
    }
  }

  function enqueue(p: Pending): void {
    queue.push(p);
    if (!running) {
      running = true;
      queueMicrotask(() => void drain());
    }
  }

  /** Queues a background renewal of `key`'s lease; requests go on using the lease meanwhile. */
  function renew(key: KeyRecord, est: AdmissionEstimate): void {
    // A failed renewal changes nothing: the lease runs out and requests go to the store.
    const ignore = () => {};
    enqueue({ key, est, renewal: true, resolve: ignore, reject: ignore });
  }

  return {
    async close() {
      closed = true;
      await sweep(true);
    },
    admit(key, est) {
      try {
        validate(est);
      } catch (e) {
        return Promise.reject(e);
      }
      const lease = leases.get(key.key_id);
      if (lease !== undefined && !closed) {
        const tm = mono();
        if (takeFromLease(lease, tm, est.tokens, est.costNano)) {
          if (!renewAsked.has(lease) && wantsRenewal(lease, tm)) {
            renewAsked.add(lease);
            renew(key, est);
          }
          const headers = rateHeaders(limitsFor(key, opts.tiers), lease.shownReq, lease.shownTok);
          return Promise.resolve(makeAdmission(key, est, headers));
        }
      }
      return new Promise<Admission>((resolve, reject) => {
        enqueue({
          key,
          est,
          resolve: (a) => a === null ? reject(new Error("admission lost its request")) : resolve(a),
          reject,
        });
      });
    },
  };
}
