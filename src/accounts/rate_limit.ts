/**
 * Per-key rate limits: requests/min and tokens/min in fixed one-minute
 * windows (`floor(now / 60000)`). The counters live in the key's
 * `AccountState`, which admission replaces under a versionstamp check, so any
 * number of gateway processes sharing one KV enforce one limit.
 *
 * Tokens are admitted on an estimate and settled on real usage: settlement
 * adds blind `sum`s to two monotonic counters (tokens refunded, tokens over
 * the estimate) that the next admission folds into the window. A refund only
 * counts while its window is current; an overrun counts in the window it is
 * settled in.
 */

import { GatewayError } from "../http/errors.ts";
import type { KvWrite } from "../store/group_commit.ts";
import type { KeyRecord, Tier } from "./keys.ts";
import {
  type AccountState,
  parseState,
  reqRefundKey,
  stateKey,
  tokOverKey,
  tokRefundKey,
  u64,
} from "./kv_layout.ts";

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

export const WINDOW_MS = 60_000;

export function windowOf(nowMs: number): number {
  return Math.floor(nowMs / WINDOW_MS);
}

/** The key's own limits when it carries them, else its tier's. */
export function limitsFor(key: KeyRecord, tiers: Tiers): TierLimits {
  const tier = tiers[key.tier];
  return { rpm: key.rpm ?? tier.rpm, tpm: key.tpm ?? tier.tpm };
}

/**
 * Brings a state to `window`, folding in settlement counters. A new window
 * starts from zero and marks the counters as seen (old refunds and overruns
 * belong to old windows).
 */
export function foldTokens(
  state: AccountState,
  window: number,
  tokRefund: bigint,
  tokOver: bigint,
  reqRefund: bigint = state.reqRefundSeen,
): AccountState {
  // A counter read older than the state can only lag it; never fold backwards.
  const refund = tokRefund > state.tokRefundSeen ? tokRefund : state.tokRefundSeen;
  const over = tokOver > state.tokOverSeen ? tokOver : state.tokOverSeen;
  const reqBack = reqRefund > state.reqRefundSeen ? reqRefund : state.reqRefundSeen;
  if (state.window !== window) {
    return {
      ...state,
      window,
      req: 0,
      tok: 0,
      tokRefundSeen: refund,
      tokOverSeen: over,
      reqRefundSeen: reqBack,
    };
  }
  const delta = Number(over - state.tokOverSeen) - Number(refund - state.tokRefundSeen);
  // Refunds only return tokens (and lease requests) this window admitted, so
  // these stay >= 0; the floor guards against a clock that disagreed about the window.
  const tok = Math.max(0, state.tok + delta);
  const req = Math.max(0, state.req - Number(reqBack - state.reqRefundSeen));
  return { ...state, req, tok, tokRefundSeen: refund, tokOverSeen: over, reqRefundSeen: reqBack };
}

function secondsToReset(nowMs: number): number {
  return Math.max(1, Math.ceil(((windowOf(nowMs) + 1) * WINDOW_MS - nowMs) / 1000));
}

/** The X-RateLimit-* headers for a window's counters. */
export function rateHeaders(
  limits: TierLimits,
  req: number,
  tok: number,
  nowMs: number,
): Record<string, string> {
  return {
    "X-RateLimit-Limit": String(limits.rpm),
    "X-RateLimit-Remaining": String(Math.max(0, limits.rpm - req)),
    "X-RateLimit-Reset": String(secondsToReset(nowMs)),
    "X-RateLimit-Limit-Tokens": String(limits.tpm),
    "X-RateLimit-Remaining-Tokens": String(Math.max(0, limits.tpm - tok)),
  };
}

export type RateDecision =
  | { ok: true; state: AccountState; headers: Record<string, string> }
  | { ok: false; error: GatewayError };

/** Admits one request of `estTokens` against a state already folded to the current window. */
export function decideRate(
  state: AccountState,
  limits: TierLimits,
  estTokens: number,
  nowMs: number,
): RateDecision {
  const reject = (message: string): RateDecision => ({
    ok: false,
    error: new GatewayError("rate_limited", message, {
      headers: {
        "Retry-After": String(secondsToReset(nowMs)),
        ...rateHeaders(limits, state.req, state.tok, nowMs),
      },
    }),
  });
  if (state.req + 1 > limits.rpm) {
    return reject(`Rate limit exceeded: ${limits.rpm} requests per minute.`);
  }
  if (estTokens > limits.tpm) {
    return reject(
      `Request too large: its estimated tokens exceed the limit of ${limits.tpm} tokens per minute.`,
    );
  }
  if (state.tok + estTokens > limits.tpm) {
    return reject(`Rate limit exceeded: ${limits.tpm} tokens per minute.`);
  }
  const next = { ...state, req: state.req + 1, tok: state.tok + estTokens };
  return { ok: true, state: next, headers: rateHeaders(limits, next.req, next.tok, nowMs) };
}

/** Settlement writes that correct the token counter from the estimate to real usage. */
export function tokenSettlementWrites(
  keyId: string,
  estTokens: number,
  actualTokens: number,
  admittedWindow: number,
  settledWindow: number,
): KvWrite[] {
  if (actualTokens > estTokens) {
    return [{ op: "sum", key: tokOverKey(keyId), value: BigInt(actualTokens - estTokens) }];
  }
  if (actualTokens < estTokens && admittedWindow === settledWindow) {
    return [{ op: "sum", key: tokRefundKey(keyId), value: BigInt(estTokens - actualTokens) }];
  }
  return [];
}

/** Current-window view for the dashboard/CLI (no write). */
export interface RateView {
  limits: TierLimits;
  window: number;
  requests: number;
  tokens: number;
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
  const window = windowOf(nowMs);
  const st = foldTokens(parseState(s.value), window, u64(r.value), u64(o.value), u64(rr.value));
  return {
    limits: limitsFor(key, tiers),
    window,
    requests: st.req,
    tokens: st.tok,
    resetSeconds: secondsToReset(nowMs),
  };
}
