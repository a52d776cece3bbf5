/**
 * Per-key rate limits: requests/min and tokens/min, each a token bucket that
 * holds one minute's worth and refills continuously at the per-minute rate
 * (fixed windows let a key spend two minutes' worth across
 * a boundary in seconds). Burst: at most the per-minute limit at once, and at
 * most `limit × (1 + t/60 s)` in any t seconds. The bucket levels live in the
 * key's `AccountState`, which admission replaces under a versionstamp check,
 * so any number of gateway processes sharing one KV enforce one limit.
 *
 * Tokens are admitted on a reservation and settled on real usage: settlement
 * adds blind `sum`s to two monotonic counters (tokens refunded, tokens over
 * the reservation) that the next admission folds into the bucket.
 */

import { GatewayError } from "../http/mod.ts";
import type { KvWrite } from "../store/mod.ts";
import {
  type AccountState,
  type KeyRecord,
  parseState,
  reqRefundKey,
  stateKey,
  type Tier,
  tokOverKey,
  tokRefundKey,
  u64,
} from "../keys/mod.ts";

export interface TierLimits {
  /** Requests per minute. */
  rpm: number;
  /** Tokens (prompt + completion) per minute. */
  tpm: number;
}
export type Tiers = Record<Tier, TierLimits>;

/**
 * The spec's published tiers; enterprise is "custom" there, so its default
 * here is only a placeholder for enterprise keys created without --rpm/--tpm.
 */
export const DEFAULT_TIERS: Tiers = {
  free: { rpm: 60, tpm: 100_000 },
  pro: { rpm: 600, tpm: 1_000_000 },
  enterprise: { rpm: 6_000, tpm: 10_000_000 },
};

/** The bucket's refill period: a full bucket drains in this long. */
export const WINDOW_MS = 60_000;

/** The key's own limits when it carries them, else its tier's. */
export function limitsFor(key: KeyRecord, tiers: Tiers): TierLimits {
  const tier = tiers[key.tier];
  return { rpm: key.rpm ?? tier.rpm, tpm: key.tpm ?? tier.tpm };
}

/**
 * Brings a state to `nowMs`: the bucket levels drain at the per-minute rates
 * (never below empty), and settlement counters not yet seen are folded in.
 */
export function foldTokens(
  state: AccountState,
  limits: TierLimits,
  nowMs: number,
  tokRefund: bigint,
  tokOver: bigint,
  reqRefund: bigint = state.reqRefundSeen,
): AccountState {
  // A counter read older than the state can only lag it; never fold backwards.
  const refund = tokRefund > state.tokRefundSeen ? tokRefund : state.tokRefundSeen;
  const over = tokOver > state.tokOverSeen ? tokOver : state.tokOverSeen;
  const reqBack = reqRefund > state.reqRefundSeen ? reqRefund : state.reqRefundSeen;
  // Another replica's clock may be behind this one's: time never runs backwards here.
  const elapsed = nowMs > state.at ? nowMs - state.at : 0;
  const tokDrained = Math.max(0, state.tok - (limits.tpm * elapsed) / WINDOW_MS);
  const reqDrained = Math.max(0, state.req - (limits.rpm * elapsed) / WINDOW_MS);
  const delta = Number(over - state.tokOverSeen) - Number(refund - state.tokRefundSeen);
  return {
    ...state,
    at: Math.max(state.at, nowMs),
    // A refund of a reservation the bucket already drained leaves it empty, not negative.
    tok: Math.max(0, tokDrained + delta),
    req: Math.max(0, reqDrained - Number(reqBack - state.reqRefundSeen)),
    tokRefundSeen: refund,
    tokOverSeen: over,
    reqRefundSeen: reqBack,
  };
}

/** Whole seconds until `level` drains to `target` at `perMinute`. */
function secondsUntil(level: number, target: number, perMinute: number): number {
  if (level <= target || perMinute <= 0) return 0;
  return Math.ceil(((level - target) * WINDOW_MS) / perMinute / 1000);
}

/** The X-RateLimit-* headers for bucket levels (Reset: seconds until both are empty). */
export function rateHeaders(
  limits: TierLimits,
  req: number,
  tok: number,
): Record<string, string> {
  const reset = Math.max(
    1,
    secondsUntil(req, 0, limits.rpm),
    secondsUntil(tok, 0, limits.tpm),
  );
  return {
    "X-RateLimit-Limit": String(limits.rpm),
    "X-RateLimit-Remaining": String(Math.max(0, Math.floor(limits.rpm - req + 1e-9))),
    "X-RateLimit-Reset": String(reset),
    "X-RateLimit-Limit-Tokens": String(limits.tpm),
    "X-RateLimit-Remaining-Tokens": String(Math.max(0, Math.floor(limits.tpm - tok + 1e-9))),
  };
}

export type RateDecision =
  | { ok: true; state: AccountState; headers: Record<string, string> }
  | { ok: false; error: GatewayError };

/** Admits one request of `estTokens` against a state already folded to now. */
export function decideRate(
  state: AccountState,
  limits: TierLimits,
  estTokens: number,
): RateDecision {
  const reject = (message: string, retryAfter: number): RateDecision => ({
    ok: false,
    error: new GatewayError("rate_limited", message, {
      headers: {
        "Retry-After": String(Math.max(1, retryAfter)),
        ...rateHeaders(limits, state.req, state.tok),
      },
    }),
  });
  // A tiny tolerance: levels are fractions, and a full bucket must still admit its last request.
  if (state.req + 1 > limits.rpm + 1e-9) {
    return reject(
      `Rate limit exceeded: ${limits.rpm} requests per minute.`,
      secondsUntil(state.req + 1, limits.rpm, limits.rpm),
    );
  }
  if (estTokens > limits.tpm) {
    return reject(
      `Request too large: its estimated tokens exceed the limit of ${limits.tpm} tokens per minute.`,
      secondsUntil(state.tok, 0, limits.tpm),
    );
  }
  if (state.tok + estTokens > limits.tpm + 1e-9) {
    return reject(
      `Rate limit exceeded: ${limits.tpm} tokens per minute.`,
      secondsUntil(state.tok + estTokens, limits.tpm, limits.tpm),
    );
  }
  const next = { ...state, req: state.req + 1, tok: state.tok + estTokens };
  return { ok: true, state: next, headers: rateHeaders(limits, next.req, next.tok) };
}

/** Settlement writes that correct the token bucket from the reservation to real usage. */
export function tokenSettlementWrites(
  keyId: string,
  estTokens: number,
  actualTokens: number,
): KvWrite[] {
  if (actualTokens > estTokens) {
    return [{ op: "sum", key: tokOverKey(keyId), value: BigInt(actualTokens - estTokens) }];
  }
  if (actualTokens < estTokens) {
    return [{ op: "sum", key: tokRefundKey(keyId), value: BigInt(estTokens - actualTokens) }];
  }
  return [];
}

/** Current bucket levels for the dashboard/CLI (no write). */
export interface RateView {
  limits: TierLimits;
  /** Requests and tokens in the buckets (whole, rounded up). */
  requests: number;
  tokens: number;
  /** Seconds until both buckets are empty. */
  resetSeconds: number;
}

export async function readRateWindow(
  kv: Deno.Kv,
  key: KeyRecord,
  tiers: Tiers,
  nowMs: number,
): Promise<RateView> {
  const [s, r, o, rr] = await kv.getMany([
    stateKey(key.key_id),
    tokRefundKey(key.key_id),
    tokOverKey(key.key_id),
    reqRefundKey(key.key_id),
  ]);
  const limits = limitsFor(key, tiers);
  const st = foldTokens(
    parseState(s.value),
    limits,
    nowMs,
    u64(r.value),
    u64(o.value),
    u64(rr.value),
  );
  return {
    limits,
    requests: Math.ceil(st.req - 1e-9),
    tokens: Math.ceil(st.tok - 1e-9),
    resetSeconds: Number(rateHeaders(limits, st.req, st.tok)["X-RateLimit-Reset"]),
  };
}
