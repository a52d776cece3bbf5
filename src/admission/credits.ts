/**
 * Credit balances in integer nano-credits (1 credit = 1e9 nano), stored as
 * `Deno.KvU64`.
 *
 * Admission reserves a request's estimated cost (a versionstamp-checked
 * replace of the balance, so racing requests cannot overdraw). Settlement is
 * blind `sum`s, group-committed with the request's receipt: it refunds
 * `estimate - actual`, or, when the actual cost is higher, adds the overrun to
 * a monotonic debt counter, because a blind subtraction could wrap below
 * zero. The next admission pays pending debt out of the balance first, so the
 * balance ends up reduced by exactly the actual cost. Only the one request in
 * flight can take the effective balance below zero (by its own overrun).
 */

import { GatewayError } from "../http/mod.ts";
import { type KvWrite, readWithDeferred, retryTransient } from "../store/mod.ts";
import {
  type AccountState,
  balanceKey,
  creditRefundKey,
  debtKey,
  keyRecordKey,
  parseState,
  stateKey,
  u64,
  USAGE_FIELDS,
  USAGE_PENDING_PREFIX,
  type UsageField,
  usageKey,
} from "../keys/mod.ts";

export const NANO_PER_CREDIT = 1_000_000_000n;
/** Balances stay below 2^63 nano (about 9.2e9 credits) so sums never wrap. */
export const MAX_BALANCE_NANO = (1n << 63n) - 1n;
/**
 * The most one settlement (or reservation) moves, in nano-credits (2^53, about
 * 9.0e6 credits): costs saturate here, so the counters settlement sums into
 * (debt, refunds, spent) grow by at most this per request and are compared
 * modulo 2^64 (`foldDebt`), exact while less than 2^63 is pending — 1,024
 * settlements at the cap, each of which needed a reservation.
 */
export const MAX_SETTLEMENT_NANO = 1n << 53n;
const U64 = 1n << 64n;

/**
 * How far a u64 counter that may have wrapped is ahead of its mark (serial-number
 * arithmetic): a difference of 2^63 or more modulo 2^64 is a read that lags the
 * mark, which is 0, never a huge amount.
 */
function u64Ahead(counter: bigint, seen: bigint): bigint {
  const d = (((counter - seen) % U64) + U64) % U64;
  return d >= U64 / 2n ? 0n : d;
}

/** Exact decimal credits → nano-credits. Rejects anything but a plain non-negative decimal. */
export function parseCredits(text: string): bigint {
  const m = /^(\d+)(?:\.(\d{1,9}))?$/.exec(text);
  if (m === null) {
    throw new RangeError("credits must be a non-negative decimal with at most 9 decimals");
  }
  const nano = BigInt(m[1]) * NANO_PER_CREDIT + BigInt((m[2] ?? "").padEnd(9, "0"));
  if (nano > MAX_BALANCE_NANO) throw new RangeError("credits amount too large");
  return nano;
}

/** Nano-credits → exact decimal credits, without trailing zeros. */
export function formatCredits(nano: bigint): string {
  const neg = nano < 0n;
  const abs = neg ? -nano : nano;
  const whole = abs / NANO_PER_CREDIT;
  const frac = (abs % NANO_PER_CREDIT).toString().padStart(9, "0").replace(/0+$/, "");
  return (neg ? "-" : "") + whole.toString() + (frac === "" ? "" : "." + frac);
}

/** Outcome of paying pending debt out of a balance. */
export interface DebtFold {
  balance: bigint;
  state: AccountState;
  /** Debt still unpaid after the fold (balance is then 0). */
  unpaid: bigint;
}

/**
 * Folds settlements into the balance: pending refunds (`refund - state.refundSeen`)
 * are added, then pending overrun debt (`debt - state.debtSeen`) is paid out of it.
 * A counter read older than the state lags it and never folds backwards.
 */
export function foldDebt(
  state: AccountState,
  balance: bigint,
  debt: bigint,
  refund = 0n,
): DebtFold {
  // Modulo 2^64: a summed counter that wrapped still gives the exact amount pending.
  const refunded = u64Ahead(refund, state.refundSeen);
  const funds = balance + refunded;
  const pending = u64Ahead(debt, state.debtSeen);
  const pay = pending < funds ? pending : funds;
  return {
    balance: funds - pay,
    state: {
      ...state,
      debtSeen: (state.debtSeen + pay) % U64,
      refundSeen: (state.refundSeen + refunded) % U64,
    },
    unpaid: pending - pay,
  };
}

export type CreditDecision = { ok: true; balance: bigint } | { ok: false; error: GatewayError };

/** Reserves `costNano` from a balance whose debt has been folded. */
export function decideCredit(fold: DebtFold, costNano: bigint): CreditDecision {
  if (fold.unpaid > 0n || fold.balance <= 0n || fold.balance < costNano) {
    return {
      ok: false,
      error: new GatewayError(
        "insufficient_credits",
        "Insufficient credits: add credits to this API key to continue.",
      ),
    };
  }
  return { ok: true, balance: fold.balance - costNano };
}

/**
 * Blind settlement writes for a request that reserved `reservedNano`. They are
 * committed with the request's receipt, which is the per-request record; no
 * separate marker is written (the in-memory `Admission` already settles once).
 */
export function creditSettlementWrites(
  keyId: string,
  reservedNano: bigint,
  actual: { promptTokens: number; completionTokens: number; costNano: bigint },
): KvWrite[] {
  const writes: KvWrite[] = [];
  // Saturated, never wrapped: one settlement moves at most MAX_SETTLEMENT_NANO.
  const cost = actual.costNano > MAX_SETTLEMENT_NANO ? MAX_SETTLEMENT_NANO : actual.costNano;
  const reserved = reservedNano > MAX_SETTLEMENT_NANO ? MAX_SETTLEMENT_NANO : reservedNano;
  if (cost < reserved) {
    writes.push({ op: "sum", key: creditRefundKey(keyId), value: reserved - cost });
  } else if (cost > reserved) {
    writes.push({ op: "sum", key: debtKey(keyId), value: cost - reserved });
  }
  // Deferred: recorded in this replica's pending row, applied to the totals now and then
  // (store/deferred_sums.ts); readers add the rows (getUsage, key_figures.ts).
  writes.push(
    { op: "defer", key: usageKey(keyId, "requests"), value: 1n },
    { op: "defer", key: usageKey(keyId, "prompt_tokens"), value: BigInt(actual.promptTokens) },
    {
      op: "defer",
      key: usageKey(keyId, "completion_tokens"),
      value: BigInt(actual.completionTokens),
    },
    { op: "defer", key: usageKey(keyId, "spent_nano"), value: cost },
  );
  return writes;
}

/**
 * Spendable balance: the stored balance minus unpaid debt. Negative only when
 * the last request's overrun exceeded what was left.
 */
export async function getBalance(kv: Deno.Kv, keyId: string): Promise<bigint> {
  const [b, d, s, r] = await kv.getMany([
    balanceKey(keyId),
    debtKey(keyId),
    stateKey(keyId),
    creditRefundKey(keyId),
  ]);
  const fold = foldDebt(parseState(s.value), u64(b.value), u64(d.value), u64(r.value));
  return fold.balance - fold.unpaid;
}

export type Usage = Record<UsageField, bigint>;

/** Usage totals recorded at settlement: the counters and the replicas' pending deltas. */
export async function getUsage(kv: Deno.Kv, keyId: string): Promise<Usage> {
  const keys = USAGE_FIELDS.map((f) => usageKey(keyId, f));
  const { shared, deferred } = await readWithDeferred(
    kv,
    USAGE_PENDING_PREFIX,
    () => kv.getMany(keys),
  );
  const [r, p, c, s] = shared.map((e, i) => u64(e.value) + deferred.of(keys[i]));
  return { requests: r, prompt_tokens: p, completion_tokens: c, spent_nano: s };
}

/**
 * Adds credits (positive nano amount) to an existing key; returns the new
 * stored balance. Checked read-modify-write so the balance can never wrap.
 */
export async function addCredits(
  kv: Deno.Kv,
  keyId: string,
  amountNano: bigint,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<bigint> {
  if (amountNano <= 0n) throw new RangeError("credit amount must be positive");
  for (;;) {
    const next = await retryTransient(async () => {
      const [k, b] = await kv.getMany([keyRecordKey(keyId), balanceKey(keyId)]);
      if (k.value === null) throw new GatewayError("not_found", "Unknown key id.");
      const next = u64(b.value) + amountNano;
      if (next > MAX_BALANCE_NANO) throw new RangeError("balance would exceed the maximum");
      const res = await kv.atomic().check(b).set(balanceKey(keyId), new Deno.KvU64(next)).commit();
      return res.ok ? next : null;
    }, { sleep });
    // null: the balance moved between the read and the commit; read it again.
    if (next !== null) return next;
  }
}
