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

import { GatewayError } from "../http/mod.ts";
import { backoffMs, isTransientKvError, sleep as defaultSleep } from "../store/mod.ts";
import type { KeyRecord } from "../keys/mod.ts";
import { AccountCache, type AccountEntries } from "./account_cache.ts";
import { batchAtomic, commitInLane } from "./admission_commit.ts";
import { decideBatch, foldAccount, type Working } from "./admission_decide.ts";
import { makeAdmission } from "./admission_settlement.ts";
import {
  type Admission,
  type AdmissionEstimate,
  type AdmissionKv,
  type Admitter,
  type AdmitterOptions,
  type Outcome,
  type Pending,
  validate,
} from "./admission_types.ts";
import { LeasePool } from "./lease_pool.ts";
import { FencedError, isFenced } from "./holds.ts";

export type {
  ActualUsage,
  Admission,
  AdmissionEstimate,
  AdmissionKv,
  Admitter,
  AdmitterOptions,
  CommitLane,
} from "./admission_types.ts";

/**
 * The admitter: a queue of pending admissions drained in batches of at most
 * `maxKeysPerBatch` keys, each read (account_cache.ts), decided
 * (admission_decide.ts), given lease slices (lease_pool.ts) and committed
 * (admission_commit.ts) in one atomic, retried as the module doc says.
 * Long only as a closure over the queue's state: each inner function is short.
 */
export function createAdmitter(kv: AdmissionKv, opts: AdmitterOptions): Admitter {
  const maxKeys = opts.maxKeysPerBatch ?? 20;
  if (!Number.isInteger(maxKeys) || maxKeys < 1 || maxKeys > 50) {
    throw new RangeError("maxKeysPerBatch must be an integer in 1..50");
  }
  const maxAttempts = opts.maxAttempts ?? 200;
  const random = opts.random ?? Math.random;
  const sleep = opts.sleep ?? defaultSleep;
  let queue: Pending[] = [];
  let running = false;
  const inst = opts.holdInstance;
  /** Whether this instance's ledger entry is known to be written. */
  let registered = false;
  const cache = new AccountCache(kv, opts.now);
  // Leases only with the group committer and the sole-replica test (see AdmitterOptions).
  const pool = opts.piggyback !== undefined && opts.soleReplica !== undefined
    ? new LeasePool({
      write: (ops) => opts.piggyback!.write(ops),
      soleReplica: opts.soleReplica,
      monotonic: opts.monotonic ?? (() => performance.now()),
      holdInstance: inst,
      leaseMaxRequests: opts.leaseMaxRequests,
      leaseParts: opts.leaseParts,
      tiers: opts.tiers,
    })
    : null;
  const admitted = (
    key: KeyRecord,
    est: AdmissionEstimate,
    headers: Record<string, string>,
    fromLease = false,
  ) => makeAdmission(key, est, headers, inst, fromLease);

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
    const fromCache = fresh ? null : cache.cached(keyIds);
    const entries = fromCache ?? await cache.read(keyIds);
    const work = new Map<string, Working>();
    for (const id of keyIds) {
      if (requested.has(id)) pool?.detach(id);
      const back = pool?.detachedOf(id);
      work.set(id, foldAccount(entries.get(id)!, keyOf.get(id)!, opts.tiers, t, back));
    }
    const outcomes = decideBatch(batch, work, opts.tiers, fromCache !== null, admitted);
    if (outcomes === "stale") return "stale";
    const granted = pool ? await pool.grant(batch, work) : new Map();
    const atomic = batchAtomic(kv, work, inst, !registered, t);
    if (atomic === null) return outcomes;
    const res = await commitInLane(atomic, opts.piggyback);
    if (!res.ok) {
      cache.forget(keyIds);
      // Not a lost race but the fence: this replica's holds were recovered (holds.ts).
      if (inst !== undefined && await isFenced(kv, inst)) throw new FencedError(inst);
      return null;
    }
    registered = true;
    pool?.committed(keyIds, granted);
    for (const [id, w] of work) {
      if (w.admitted) cache.written(id, entries.get(id)!, w.balance, w.state, res.versionstamp, t);
    }
    return outcomes;
  }

  async function runBatch(batch: Pending[]): Promise<void> {
    let fresh = false;
    for (let n = 1;; n++) {
      let outcomes: Outcome[] | null | "stale";
      try {
        outcomes = await attempt(batch, fresh);
      } catch (e) {
        if (!isTransientKvError(e) || n >= maxAttempts) {
          pool?.restore(batch);
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
        pool?.restore(batch);
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

  /** Account reads of `mayPay` in flight, by key id (concurrent callers share one). */
  const probing = new Map<string, Promise<Map<string, AccountEntries>>>();

  async function mayPay(key: KeyRecord): Promise<boolean> {
    const id = key.key_id;
    if (pool?.holds(id)) return true;
    let entries = cache.cached([id]);
    if (entries === null) {
      let read = probing.get(id);
      if (read === undefined) {
        read = cache.read([id]).finally(() => probing.delete(id));
        probing.set(id, read);
      }
      entries = await read;
    }
    const w = foldAccount(entries.get(id)!, key, opts.tiers, opts.now(), undefined);
    return w.unpaid === 0n && w.balance > 0n;
  }

  return {
    mayPay,
    async close() {
      await pool?.close();
    },
    admit(key, est) {
      try {
        validate(est);
      } catch (e) {
        return Promise.reject(e);
      }
      const headers = pool?.take(key, est, () => renew(key, est));
      if (headers) return Promise.resolve(admitted(key, est, headers, true));
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
