/**
 * Admission's decision, in memory and without I/O: fold each account's
 * entries (and any lease folded back) into a working state, then decide the
 * batch's requests serially against it — rate limits first, then credits.
 */
import { decideCredit, foldDebt } from "./credits.ts";
import { type AccountState, type KeyRecord, parseState, u64 } from "../keys/mod.ts";
import type { Lease } from "./leases.ts";
import { decideRate, foldTokens, limitsFor, type Tiers } from "./rate_limit.ts";
import type { AccountEntries } from "./account_cache.ts";
import type { Admission, AdmissionEstimate, Outcome, Pending } from "./admission_types.ts";

/** One account as the batch decides it, and what its commit must write. */
export interface Working {
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
  /** Requests and tokens of lease slices this commit reserves and closes (the hold ledger). */
  rate: { heldReq: number; heldTok: number; closedReq: number; closedTok: number };
  /** The balance and state entries read, which the commit checks. */
  entries: AccountEntries;
}

/**
 * Near a limit, decisions must see every settlement: fewer than four more
 * requests of this size fit in the token bucket or in the balance.
 */
export function nearLimit(
  tok: number,
  tpm: number,
  estTokens: number,
  balance: bigint,
  costNano: bigint,
): boolean {
  return tpm - tok < 4 * estTokens || balance < 4n * costNano || balance <= 0n;
}

/** `key`'s account at `t`, with `back` (a lease folded back into this commit) returned. */
export function foldAccount(
  entries: AccountEntries,
  key: KeyRecord,
  tiers: Tiers,
  t: number,
  back: Lease | undefined,
): Working {
  const [b, s, d, r, o, cr, rr] = entries;
  const state = foldTokens(
    parseState(s.value),
    limitsFor(key, tiers),
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
    rate: { heldReq: 0, heldTok: 0, closedReq: back?.req ?? 0, closedTok: back?.tok ?? 0 },
    entries: [b, s],
  };
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
  return w;
}

/**
 * Decides `batch` in order against `work` (updated in place). From cached
 * entries (`fromCache`) it returns "stale" instead of any refusal or any
 * decision near a limit, so those are made on a fresh read.
 */
export function decideBatch(
  batch: Pending[],
  work: Map<string, Working>,
  tiers: Tiers,
  fromCache: boolean,
  admit: (key: KeyRecord, est: AdmissionEstimate, headers: Record<string, string>) => Admission,
): Outcome[] | "stale" {
  const outcomes: Outcome[] = [];
  for (const p of batch) {
    const w = work.get(p.key.key_id);
    if (w === undefined) throw new Error("admission batch lost a key");
    const limits = limitsFor(p.key, tiers);
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
    outcomes.push({ ok: true, admission: admit(p.key, p.est, rate.headers) });
  }
  return outcomes;
}
