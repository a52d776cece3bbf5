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
import { backoffMs, isTransientKvError } from "../store/group_commit.ts";
import { creditSettlementWrites, decideCredit, foldDebt } from "./credits.ts";
import type { KeyRecord } from "./keys.ts";
import {
  type AccountState,
  balanceKey,
  debtKey,
  parseState,
  stateKey,
  tokOverKey,
  tokRefundKey,
  u64,
} from "./kv_layout.ts";
import {
  decideRate,
  foldTokens,
  limitsFor,
  type Tiers,
  tokenSettlementWrites,
  windowOf,
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
}

export interface AdmitterOptions {
  tiers: Tiers;
  now: () => number;
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

/** The KV operations admission needs (lets tests inject lock errors). */
export type AdmissionKv = Pick<Deno.Kv, "getMany" | "atomic">;

interface Pending {
  key: KeyRecord;
  est: AdmissionEstimate;
  resolve: (a: Admission) => void;
  reject: (e: unknown) => void;
}

const KEYS_PER_READ = 2;

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

  function makeAdmission(
    key: KeyRecord,
    est: AdmissionEstimate,
    window: number,
    headers: Record<string, string>,
  ): Admission {
    let settled = false;
    return {
      headers,
      settlement(actual) {
        validateActual(actual);
        if (settled) return [];
        settled = true;
        const t = opts.now();
        return [
          ...creditSettlementWrites(key.key_id, est.requestId, est.costNano, actual, t),
          ...tokenSettlementWrites(
            key.key_id,
            est.tokens,
            actual.promptTokens + actual.completionTokens,
            window,
            windowOf(t),
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

  async function readAll(keyIds: string[]): Promise<Map<string, Deno.KvEntryMaybe<unknown>[]>> {
    const groups: string[][] = [];
    for (let i = 0; i < keyIds.length; i += KEYS_PER_READ) {
      groups.push(keyIds.slice(i, i + KEYS_PER_READ));
    }
    const results = await Promise.all(groups.map((g) =>
      kv.getMany(
        g.flatMap((id) => [
          balanceKey(id),
          stateKey(id),
          debtKey(id),
          tokRefundKey(id),
          tokOverKey(id),
        ]),
      )
    ));
    const out = new Map<string, Deno.KvEntryMaybe<unknown>[]>();
    groups.forEach((g, gi) =>
      g.forEach((id, i) => out.set(id, results[gi].slice(i * 5, i * 5 + 5)))
    );
    return out;
  }

  type Outcome = { ok: true; admission: Admission } | { ok: false; error: GatewayError };

  /** One read-decide-commit attempt; null when the commit lost a versionstamp race. */
  async function attempt(batch: Pending[]): Promise<Outcome[] | null> {
    const t = opts.now();
    const window = windowOf(t);
    const keyIds = [...new Set(batch.map((p) => p.key.key_id))];
    const entries = await readAll(keyIds);
    interface Working {
      balance: bigint;
      state: AccountState;
      unpaid: bigint;
      admitted: boolean;
      entries: Deno.KvEntryMaybe<unknown>[];
    }
    const work = new Map<string, Working>();
    for (const id of keyIds) {
      const [b, s, d, r, o] = entries.get(id) ?? [];
      const state = foldTokens(parseState(s.value), window, u64(r.value), u64(o.value));
      const fold = foldDebt(state, u64(b.value), u64(d.value));
      work.set(id, {
        balance: fold.balance,
        state: fold.state,
        unpaid: fold.unpaid,
        admitted: false,
        entries: [b, s],
      });
    }
    const outcomes: Outcome[] = [];
    for (const p of batch) {
      const w = work.get(p.key.key_id);
      if (w === undefined) throw new Error("admission batch lost a key");
      const rate = decideRate(w.state, limitsFor(p.key, opts.tiers), p.est.tokens, t);
      if (!rate.ok) {
        outcomes.push(rate);
        continue;
      }
      const credit = decideCredit(
        { balance: w.balance, state: w.state, unpaid: w.unpaid },
        p.est.costNano,
      );
      if (!credit.ok) {
        outcomes.push(credit);
        continue;
      }
      w.state = rate.state;
      w.balance = credit.balance;
      w.admitted = true;
      outcomes.push({ ok: true, admission: makeAdmission(p.key, p.est, window, rate.headers) });
    }
    const atomic = kv.atomic();
    let writes = 0;
    for (const [id, w] of work) {
      if (!w.admitted) continue;
      const [b, s] = w.entries;
      atomic.check(b).check(s)
        .set(balanceKey(id), new Deno.KvU64(w.balance))
        .set(stateKey(id), w.state);
      writes++;
    }
    if (writes === 0) return outcomes;
    const res = await atomic.commit();
    return res.ok ? outcomes : null;
  }

  async function runBatch(batch: Pending[]): Promise<void> {
    for (let n = 1;; n++) {
      let outcomes: Outcome[] | null;
      try {
        outcomes = await attempt(batch);
      } catch (e) {
        if (!isTransientKvError(e) || n >= maxAttempts) {
          for (const p of batch) p.reject(e);
          return;
        }
        await sleep(backoffMs(n, random));
        continue;
      }
      if (outcomes !== null) {
        outcomes.forEach((o, i) => o.ok ? batch[i].resolve(o.admission) : batch[i].reject(o.error));
        return;
      }
      if (n >= maxAttempts) {
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
      while (queue.length > 0) await runBatch(takeBatch());
    } finally {
      running = false;
    }
  }

  return {
    admit(key, est) {
      try {
        validate(est);
      } catch (e) {
        return Promise.reject(e);
      }
      return new Promise<Admission>((resolve, reject) => {
        queue.push({ key, est, resolve, reject });
        if (!running) {
          running = true;
          queueMicrotask(() => void drain());
        }
      });
    },
  };
}
