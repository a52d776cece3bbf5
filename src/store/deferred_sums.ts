/**
 * Deferred sums: counters a replica adds to in almost every commit (usage
 * totals and per-day usage), recorded in one row of its own instead of as a
 * `sum` on each counter, and applied to the counters now and then.
 *
 * Why: a lone request's commit carried 13 blind sums, each a read and a write
 * of a row elsewhere in SQLite's B-tree; on the bench VM they added ~200 µs to
 * a ~900 µs commit, where one more small row adds ~45 µs
 * (docs/decisions/deferred-usage-sums.md). A replica's pending row is written
 * only by that replica (its commits are serialized: the group committer's own,
 * and `exclusive` sections), so it can hold the running deltas as a plain
 * `set`, and nothing is read before writing.
 *
 * The row `[...prefix, instance]` holds `{ epoch, entries }`: the deltas not
 * yet applied, and how many times they were applied ("flushed") before. A
 * flush commits the entries as `sum`s and the row emptied with `epoch + 1`, in
 * one atomic commit, so a delta is always in exactly one place: the row or the
 * counter. Readers add the rows to the counters (`readDeferred`,
 * `deferredConsistent`): a row whose epoch did not move while the counters
 * were read was not flushed meanwhile, so nothing is counted twice or missed.
 * A replica that dies leaves its row; whoever recovers it (after fencing it,
 * admission/holds.ts) applies and deletes it (`foldDeferred`).
 */
import { asSum, type KvWrite } from "./kv_writes.ts";

/** What a pending row holds. */
export interface DeferredRow {
  epoch: number;
  entries: [Deno.KvKey, bigint][];
}

/** A key as exact Map text: each part tagged with its type (strings, numbers, bigints, bytes, booleans). */
export function keyText(key: Deno.KvKey): string {
  let out = "";
  for (const p of key) {
    if (typeof p === "string") out += `s${p.length}:${p}`;
    else if (typeof p === "number") out += `n${Object.is(p, -0) ? "-0" : String(p)};`;
    else if (typeof p === "bigint") out += `b${p};`;
    else if (typeof p === "boolean") out += p ? "t" : "f";
    else if (p instanceof Uint8Array) out += `u${p.length}:${p.join(",")};`;
    else out += `y${String(p)};`;
  }
  return out;
}

/** Narrows a stored row; anything else means the store is corrupt. */
export function parseDeferredRow(v: unknown): DeferredRow {
  const o = v as Partial<DeferredRow> | null;
  if (
    !o || typeof o.epoch !== "number" || !Array.isArray(o.entries) ||
    !o.entries.every((e) => Array.isArray(e) && Array.isArray(e[0]) && typeof e[1] === "bigint")
  ) {
    throw new Error("corrupt deferred-sums row");
  }
  return o as DeferredRow;
}

export interface DeferredOptions {
  /** This replica's row: `[...prefix, instance]`. */
  row: Deno.KvKey;
  /** Deltas older than this are applied with the next commit (or by the idle flush). */
  flushMs: number;
  /** More distinct counters than this are applied with the next commit that has room. */
  maxEntries: number;
  now: () => number;
}

/** The writes one commit carries for the deferred sums, and what to do once it is durable. */
export interface DeferredPlan {
  writes: KvWrite[];
  /** Call once the commit carrying `writes` is durable (never after a failed one). */
  done(): void;
}

/** One replica's deferred sums: what its row durably holds, and the next commit's writes. */
export class DeferredSums {
  readonly #o: DeferredOptions;
  /** The row's entries as durably committed. */
  #entries = new Map<string, [Deno.KvKey, bigint]>();
  #epoch = 0;
  /** When the oldest entry was added, or null with none. */
  #since: number | null = null;
  /** The row exists in the store (written by a commit, not yet deleted). */
  #stored = false;

  constructor(o: DeferredOptions) {
    if (!(o.flushMs > 0) || !Number.isInteger(o.maxEntries) || o.maxEntries < 1) {
      throw new RangeError("flushMs must be positive and maxEntries a positive integer");
    }
    this.#o = o;
  }

  get flushMs(): number {
    return this.#o.flushMs;
  }

  /** Deltas are waiting in the row. */
  get pending(): boolean {
    return this.#entries.size > 0;
  }

  /** The pending deltas are old enough to apply now. */
  get due(): boolean {
    return this.#old(this.#since, this.#o.now());
  }

  #old(since: number | null, now: number): boolean {
    return since !== null && now - since >= this.#o.flushMs;
  }

  /**
   * The writes for a commit that adds `deltas` (`defer` ops), with `room`
   * mutations left in it: the row with them, or — when a flush is due (old
   * deltas, too many, or `flush`) and fits — every delta as a `sum` and the
   * row emptied. When neither fits (over twice `maxEntries` counters and no
   * room to flush them), the deltas as plain `sum`s. Nothing at all when there
   * is nothing to write. `room` must hold the deltas as sums.
   */
  plan(deltas: readonly KvWrite[], room: number, flush = false): DeferredPlan {
    const next = new Map(this.#entries);
    let changed = false;
    for (const d of deltas) {
      if (d.op !== "defer" || d.value === 0n) continue;
      changed = true;
      const t = keyText(d.key);
      const v = (next.get(t)?.[1] ?? 0n) + d.value;
      if (v === 0n) next.delete(t);
      else next.set(t, [d.key, v]);
    }
    const now = this.#o.now();
    const since = next.size === 0 ? null : this.#since ?? now;
    const wanted = flush || next.size > this.#o.maxEntries || this.#old(since, now);
    if (wanted && next.size > 0 && next.size + 1 <= room) {
      const epoch = this.#epoch + 1;
      const writes: KvWrite[] = [...next.values()].map(([key, value]) => ({
        op: "sum",
        key,
        value,
      }));
      writes.push({ op: "set", key: this.#o.row, value: { epoch, entries: [] } });
      return {
        writes,
        done: () => {
          this.#entries = new Map();
          this.#epoch = epoch;
          this.#since = null;
          this.#stored = true;
        },
      };
    }
    if (!changed) return { writes: [], done: () => {} };
    if (next.size > 2 * this.#o.maxEntries || room < 1) {
      // Too many counters to flush in this commit (a batch of many keys) and too many to
      // keep in one row (a KV value holds 64 KiB): this commit's deltas are plain sums,
      // and the row stays as it is.
      const writes = deltas.filter((d) => d.op === "defer" && d.value !== 0n).map(asSum);
      return { writes, done: () => {} };
    }
    const row: DeferredRow = { epoch: this.#epoch, entries: [...next.values()] };
    return {
      writes: [{ op: "set", key: this.#o.row, value: row }],
      done: () => {
        this.#entries = next;
        this.#since = since;
        this.#stored = true;
      },
    };
  }

  /** The last commit: every delta as a `sum`, and the row deleted. */
  closing(): DeferredPlan {
    if (!this.#stored) return { writes: [], done: () => {} };
    const writes: KvWrite[] = [...this.#entries.values()]
      .map(([key, value]) => ({ op: "sum", key, value }));
    writes.push({ op: "delete", key: this.#o.row });
    return {
      writes,
      done: () => {
        this.#entries = new Map();
        this.#since = null;
        this.#stored = false;
      },
    };
  }
}

/** Every replica's pending row under `prefix`, as read at one moment. */
export interface DeferredSnapshot {
  /** By the row key's text. */
  rows: Map<string, DeferredRow>;
}

/** Reads every pending row under `prefix`. */
export async function readDeferred(
  kv: Pick<Deno.Kv, "list">,
  prefix: Deno.KvKey,
): Promise<DeferredSnapshot> {
  const rows = new Map<string, DeferredRow>();
  for await (const e of kv.list({ prefix })) rows.set(keyText(e.key), parseDeferredRow(e.value));
  return { rows };
}

/**
 * Whether counters read between `before` and `after` go with `after`'s rows:
 * no row was flushed or deleted in between (its epoch is the same), and a row
 * that appeared was never flushed. Deltas added meanwhile are only in the rows.
 */
export function deferredConsistent(before: DeferredSnapshot, after: DeferredSnapshot): boolean {
  for (const [k, r] of before.rows) {
    if (after.rows.get(k)?.epoch !== r.epoch) return false;
  }
  for (const [k, r] of after.rows) {
    if (!before.rows.has(k) && r.epoch !== 0) return false;
  }
  return true;
}

/** The pending deltas of every replica, added up by counter. */
export interface DeferredTotals {
  /** One counter's pending delta (0 when it has none). */
  of(key: Deno.KvKey): bigint;
  /** Every counter with a pending delta. */
  entries(): IterableIterator<[Deno.KvKey, bigint]>;
}

/** Every pending delta of a snapshot, added up by counter. */
export function deferredTotals(s: DeferredSnapshot): DeferredTotals {
  const m = new Map<string, [Deno.KvKey, bigint]>();
  for (const r of s.rows.values()) {
    for (const [key, v] of r.entries) {
      const t = keyText(key);
      m.set(t, [key, (m.get(t)?.[1] ?? 0n) + v]);
    }
  }
  return { of: (key) => m.get(keyText(key))?.[1] ?? 0n, entries: () => m.values() };
}

/** Tries before settling for a read that raced flushes (then a delta may be missed, never doubled). */
const READ_TRIES = 8;

/**
 * `readShared()` (reads of the counters) with the pending deltas that go with
 * it: the rows are read before and after, and the read is repeated while a
 * flush landed in between.
 */
export async function readWithDeferred<T>(
  kv: Pick<Deno.Kv, "list">,
  prefix: Deno.KvKey,
  readShared: () => Promise<T>,
): Promise<{ shared: T; deferred: DeferredTotals }> {
  let before = await readDeferred(kv, prefix);
  for (let i = 1;; i++) {
    const shared = await readShared();
    const after = await readDeferred(kv, prefix);
    if (i >= READ_TRIES || deferredConsistent(before, after)) {
      return { shared, deferred: deferredTotals(after) };
    }
    before = after;
  }
}

/**
 * Applies and deletes a dead replica's row (only once it is fenced: it can
 * write the row no more). Safe to run from several processes: the row is
 * checked, so its deltas are applied once. Returns how many were applied.
 */
export async function foldDeferred(
  kv: Pick<Deno.Kv, "get" | "atomic">,
  row: Deno.KvKey,
): Promise<number> {
  for (;;) {
    const e = await kv.get(row);
    if (e.versionstamp === null) return 0;
    const r = parseDeferredRow(e.value);
    const op = kv.atomic().check(e).delete(row);
    let n = 0;
    for (const [key, v] of r.entries) {
      if (v === 0n) continue;
      op.sum(key, ((v % U64) + U64) % U64);
      n++;
    }
    if ((await op.commit()).ok) return n;
  }
}

const U64 = 1n << 64n;
