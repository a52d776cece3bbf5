/**
 * The accounts key space in Deno KV, in one place: API key records, the
 * digest index, balances, usage totals and the per-key admission state.
 *
 * Values that settlement changes are `Deno.KvU64` counters so that settlement
 * can be blind `sum` writes, group-committed with the request's receipt (the
 * usage counters deferred: they wait in the replica's pending row and are
 * applied within a second, store/deferred_sums.ts).
 * Everything admission decides on (request/token bucket levels and how much
 * of the settlement counters it has already folded in) sits in one
 * `AccountState` object per key, overwritten in place, so nothing grows per
 * minute.
 */

/** `["keys", key_id]` → `KeyRecord`. */
export const keyRecordKey = (keyId: string): Deno.KvKey => ["keys", keyId];
/** `["keys_by_digest", sha256 hex]` → key_id. */
export const digestIndexKey = (digestHex: string): Deno.KvKey => ["keys_by_digest", digestHex];
/** Spendable nano-credits (KvU64), reduced by admission, refunded by settlement. */
export const balanceKey = (keyId: string): Deno.KvKey => ["acct", keyId, "balance"];
/** Monotonic KvU64: total nano-credits by which actual costs exceeded their estimates. */
export const debtKey = (keyId: string): Deno.KvKey => ["acct", keyId, "debt"];
/** Monotonic KvU64: tokens reserved but not used (refunded to the token bucket). */
export const tokRefundKey = (keyId: string): Deno.KvKey => ["acct", keyId, "tok_refund"];
/** Monotonic KvU64: requests reserved by a quota lease and handed back unused. */
export const reqRefundKey = (keyId: string): Deno.KvKey => ["acct", keyId, "req_refund"];
/** Monotonic KvU64: tokens used beyond their estimate. */
export const tokOverKey = (keyId: string): Deno.KvKey => ["acct", keyId, "tok_over"];
/**
 * Credits returned by settlements (estimate − actual), folded into the balance
 * at the next admission. Kept apart from the balance so that settlements never
 * touch the versionstamp-checked entries (which lets admission cache them).
 */
export const creditRefundKey = (keyId: string): Deno.KvKey => ["acct", keyId, "refund"];
/** `AccountState` object. */
export const stateKey = (keyId: string): Deno.KvKey => ["acct", keyId, "state"];
/** Usage totals (KvU64 each). */
export const USAGE_FIELDS = [
  "requests",
  "prompt_tokens",
  "completion_tokens",
  "spent_nano",
] as const;
export type UsageField = (typeof USAGE_FIELDS)[number];
export const usageKey = (keyId: string, field: UsageField): Deno.KvKey => [
  "usage",
  keyId,
  field,
];

/**
 * `["usage_pending", instance]`: a replica's usage deltas (totals and per day)
 * not yet applied to the counters (store/deferred_sums.ts). Every reader of
 * usage adds these rows.
 */
export const USAGE_PENDING_PREFIX: Deno.KvKey = ["usage_pending"];
export const usagePendingKey = (
  instance: string,
): Deno.KvKey => [...USAGE_PENDING_PREFIX, instance];

/** Per-key admission state, read and replaced under a versionstamp check. */
export interface AccountState {
  /** Epoch ms the bucket levels below were last brought to. */
  at: number;
  /** Request bucket level: requests admitted, drained at rpm per minute. */
  req: number;
  /** Token bucket level: tokens reserved (net of folded refunds/overruns), drained at tpm. */
  tok: number;
  /** Values of the tok_refund / tok_over / debt counters already folded in. */
  tokRefundSeen: bigint;
  tokOverSeen: bigint;
  /** Value of the req_refund counter already folded in. */
  reqRefundSeen: bigint;
  debtSeen: bigint;
  /** Value of the credit refund counter already folded into the balance. */
  refundSeen: bigint;
}

export const EMPTY_STATE: AccountState = {
  at: 0,
  req: 0,
  tok: 0,
  tokRefundSeen: 0n,
  tokOverSeen: 0n,
  reqRefundSeen: 0n,
  debtSeen: 0n,
  refundSeen: 0n,
};

/** Narrows a stored state; anything else means the store is corrupt. */
export function parseState(v: unknown): AccountState {
  if (v === null || v === undefined) return EMPTY_STATE;
  if (typeof v !== "object") throw new Error("corrupt account state");
  const o = v as Record<string, unknown>;
  const { req, tok, tokRefundSeen, tokOverSeen, debtSeen } = o;
  // A state of the fixed-window limiter counts as used until its window's end.
  const at = typeof o.at === "number"
    ? o.at
    : typeof o.window === "number"
    ? (o.window + 1) * 60_000
    : undefined;
  const refundSeen = o.refundSeen ?? 0n;
  const reqRefundSeen = o.reqRefundSeen ?? 0n;
  if (
    typeof at !== "number" || typeof req !== "number" || typeof tok !== "number" ||
    typeof tokRefundSeen !== "bigint" || typeof tokOverSeen !== "bigint" ||
    typeof debtSeen !== "bigint" || typeof refundSeen !== "bigint" ||
    typeof reqRefundSeen !== "bigint"
  ) {
    throw new Error("corrupt account state");
  }
  return { at, req, tok, tokRefundSeen, tokOverSeen, reqRefundSeen, debtSeen, refundSeen };
}

/** A `Deno.KvU64` entry's value, 0 when absent. */
export function u64(v: unknown): bigint {
  if (v === null || v === undefined) return 0n;
  if (v instanceof Deno.KvU64) return v.value;
  throw new Error("corrupt counter");
}
