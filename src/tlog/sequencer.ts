/**
 * Sequencing: turning committed pending entries into tree leaves. Every
 * replica runs one; they share the store and take turns through one KV
 * check on the head. A run reads a batch of pending entries, appends them to
 * the right edge, signs the checkpoint of the new size, and commits tiles,
 * bundle, leaf index, head and checkpoint together while deleting the
 * pending entries — all or nothing. Two replicas racing for the same size:
 * the loser's check fails and it re-reads (no fork); an entry stays pending
 * until a commit that sequences it lands (no gap, no loss); a replica killed
 * mid-append left nothing half-written, and the survivors' sweep sequences
 * its pending entries. Head and checkpoint are one value, so there is no
 * crash window between them.
 */
import { bytesToHex, checkpointBody } from "../aci/mod.ts";
import { applyWrites, type BorrowedWrites, retryTransient } from "../store/mod.ts";
import {
  decodeBundle,
  Edge,
  type Head,
  HEAD_KEY,
  kvRows,
  leafAtKey,
  leafKey,
  packLeafRefs,
  PENDING_PREFIX,
  type QueuedLeaf,
  queuedLeaf,
} from "./tiles.ts";

/**
 * Entries per append, inside KV's atomic limits even when every one is an
 * entry with a leaf-index row of its own (~80 key bytes; receipts share rows).
 */
const BATCH = 400;

export interface SequencerOptions {
  kv: Deno.Kv;
  origin: string;
  /** Signs a checkpoint body: one note signature line (the current keyset's log key). */
  sign: (body: string) => string;
  /** Told after each appended batch (cosigning, metrics). */
  onAppend?: (head: Head, count: number) => void;
  onError?: (e: unknown) => void;
  /** The clock of `caughtUpSince` (epoch ms). */
  now?: () => number;
  /**
   * False on all but one worker of a host (docs/decisions/workers.md): the log has one
   * appender per host, so `kick` does nothing here and the pending rows wait for that
   * one; only `drain` (at shutdown) appends, so nothing waits for a restart.
   */
  append?: boolean;
  /**
   * The receipts' group commit lane (store/group_commit.ts): an append takes its
   * turn in it and carries the receipt writes queued meanwhile, so its commit (and
   * fsync) is one the receipts would otherwise have made on their own. Carried
   * writes are checked against `fence` as the committer's own commits are.
   */
  lane?: {
    exclusive<T>(f: () => Promise<T>): Promise<T>;
    borrow(maxMutations: number, maxBytes: number): BorrowedWrites | null;
    fence?: Deno.KvKey;
  };
}

/**
 * What an append leaves for carried writes: inside KV's atomic limits (1,000
 * mutations, 800 KiB, 80 KiB of keys) once the append's own rows are counted,
 * with keys of up to ~150 bytes. A commit refused anyway (a limit, a lost race,
 * a fence) is made again without carrying anything.
 */
const CARRY_MUTATIONS = 400;
const CARRY_BYTES = 400_000;

export interface Sequencer {
  /** Sequence what is pending now (coalesced: one run at a time, rerun if kicked meanwhile). */
  kick(): void;
  /**
   * Whether a pass that took every row then pending (any replica's) began at
   * or after `t` (the `now` clock): rows older than `t` have been seen.
   */
  caughtUpSince(t: number): boolean;
  /** Resolves once everything pending when called was sequenced (by any replica). */
  drain(): Promise<void>;
  /** Stops sequencing (after the run in progress). */
  close(): Promise<void>;
}

export function createSequencer(o: SequencerOptions): Sequencer {
  const { kv } = o;
  let edge: { versionstamp: string; edge: Edge } | null = null;
  let running: Promise<void> | null = null;
  let again = false;
  let closed = false;
  let caughtUp = -Infinity;
  const rows = kvRows(kv);

  /**
   * One append of what is pending (up to BATCH entries). "more": the batch was
   * full and more may wait; "done": appended, the rest waits for the next kick
   * (so entries that arrive during an append join the next batch instead of
   * making a small append of their own); "empty": nothing was pending.
   */
  const once = async (): Promise<"more" | "done" | "empty"> => {
    // After a commit that failed carrying writes (a lost race, or this replica fenced),
    // the retries append alone: the carried writes went back to their own committer.
    let carry = o.lane !== undefined;
    for (;;) {
      const listedAt = o.now?.() ?? -Infinity;
      // Pending rows hold the framed entries of one commit each; take rows up to BATCH entries.
      const pending: Deno.KvEntry<Uint8Array>[] = [];
      const queued: QueuedLeaf[] = [];
      // Each entry as queued: what its bundle chunk stores (a receipt's 37-byte frame).
      const frames: Uint8Array[] = [];
      let full = false;
      for await (const e of kv.list<Uint8Array>({ prefix: PENDING_PREFIX }, { limit: BATCH })) {
        const framed = decodeBundle(e.value);
        if (pending.length > 0 && queued.length + framed.length > BATCH) {
          full = true;
          break;
        }
        pending.push(e);
        for (const r of framed) {
          queued.push(queuedLeaf(r));
          frames.push(r);
        }
      }
      if (pending.length === 0) {
        caughtUp = listedAt;
        return "empty";
      }
      if (pending.length === BATCH) full = true;
      // The edge of our own last append is current unless another replica appended since:
      // the head check below finds that out, so the head is read only after a lost race.
      let base: Edge;
      let check: Deno.AtomicCheck;
      if (edge !== null) {
        base = edge.edge;
        check = { key: HEAD_KEY, versionstamp: edge.versionstamp };
      } else {
        const head = await kv.get<Head>(HEAD_KEY);
        base = await Edge.load(head.value?.size ?? 0, rows);
        check = head;
      }
      const size = base.size;
      const next = base.clone();
      // The same entry twice in one batch (a session stored by two replicas) is logged once;
      // across batches, enqueue (log.ts) skips entries already in the log.
      // (Receipts, queued with their second, are unique by construction: their digests
      // cover their own receipt ids.)
      const seen = new Set<string>();
      const fresh: QueuedLeaf[] = [];
      const hashes: Uint8Array[] = [];
      const records: Uint8Array[] = [];
      for (const [i, q] of queued.entries()) {
        if (q.second === null) {
          const hex = bytesToHex(q.hash);
          if (seen.has(hex)) continue;
          seen.add(hex);
        }
        fresh.push(q);
        hashes.push(q.hash);
        records.push(frames[i]);
      }
      const writes = next.appendLeaves(hashes, records);
      const root = next.root().slice(); // stored: not a view into the hash slab
      const body = checkpointBody(o.origin, next.size, root);
      const newHead: Head = { size: next.size, root, checkpoint: body + "\n" + o.sign(body) };
      // The head check alone serializes appends: every append changes the head.
      const atomic = kv.atomic().check(check);
      for (const p of pending) atomic.delete(p.key);
      for (const w of writes.sets) atomic.set(w.key, w.value);
      for (const k of writes.deletes) atomic.delete(k);
      // Leaf indexes: entries with a known second in one row per second (no row per receipt),
      // the others (sessions, keysets: few) in a row each, found by their hash alone.
      const bySecond = new Map<number, { index: number; hash: Uint8Array }[]>();
      let leafRows = 0;
      fresh.forEach((q, i) => {
        const ref = { index: size + i, hash: writes.leaves[i] };
        if (q.second === null) {
          leafRows++;
          return void atomic.set(leafKey(bytesToHex(ref.hash)), ref.index);
        }
        const refs = bySecond.get(q.second);
        if (refs) refs.push(ref);
        else bySecond.set(q.second, [ref]);
      });
      for (const [second, refs] of bySecond) {
        atomic.set(leafAtKey(second, refs[0].index), packLeafRefs(refs));
      }
      atomic.set(HEAD_KEY, newHead);
      const own = {
        mutations: pending.length + writes.sets.length + writes.deletes.length + bySecond.size +
          leafRows + 2,
        bytes: writes.sets.reduce((a, w) => a + w.value.length + 64, 0) +
          128 * (pending.length + writes.deletes.length + bySecond.size + fresh.length + 2),
      };
      const commit = async () => {
        const lent = carry && o.lane
          ? o.lane.borrow(CARRY_MUTATIONS - own.mutations, CARRY_BYTES - own.bytes)
          : null;
        if (lent) {
          if (o.lane?.fence) atomic.check({ key: o.lane.fence, versionstamp: null });
          applyWrites(atomic, lent.ops);
        }
        let r: Deno.KvCommitResult | Deno.KvCommitError;
        try {
          r = await atomic.commit();
        } catch (e) {
          lent?.settle(false);
          if (lent === null) throw e;
          carry = false;
          return null; // made again below, alone
        }
        lent?.settle(r.ok);
        if (!r.ok && lent) carry = false;
        return r;
      };
      const res = o.lane ? await o.lane.exclusive(commit) : await commit();
      if (res === null) continue;
      if (res.ok) {
        edge = { versionstamp: res.versionstamp, edge: next };
        o.onAppend?.(newHead, fresh.length);
        if (!full) caughtUp = listedAt;
        return full ? "more" : "done";
      }
      // Another replica appended first (maybe these very entries): re-read and retry.
      edge = null;
    }
  };

  const run = async () => {
    do {
      again = false;
      try {
        while (!closed && await retryTransient(once) === "more") { /* full batches back to back */ }
      } catch (e) {
        o.onError?.(e);
      }
    } while (again && !closed);
    running = null;
  };

  const start = () => {
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = run();
  };

  return {
    kick() {
      if (o.append !== false) start();
    },
    caughtUpSince: (t) => caughtUp >= t,
    async drain() {
      for (;;) {
        if (running) await running;
        const any = kv.list({ prefix: PENDING_PREFIX }, { limit: 1 });
        let empty = true;
        for await (const _ of any) empty = false;
        if (empty) return;
        start();
        if (running) await running;
      }
    },
    async close() {
      closed = true;
      if (running) await running;
    },
  };
}
