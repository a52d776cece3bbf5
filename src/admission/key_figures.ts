/**
 * A key's figures, computed once for every surface (`GET /v1/key`, the admin
 * API, `deno task keys show|list|credit`), net of what is only reserved.
 *
 * The store keeps reservations inside the balance and the rate buckets:
 * admission takes a request's worst-case cost from the balance before the
 * prompt leaves, and a quota lease (leases.ts) takes a whole slice of the
 * balance and of both buckets at once. Reported raw, one request on a fresh
 * key read as 65 requests used and a balance short by the unused slice. The
 * hold ledger (holds.ts) records what every replica holds, so:
 *
 * - `balance` = credits given − credits spent by settled requests;
 * - `reserved` = credits held by all replicas (requests in flight, lease slices);
 * - `available` = `balance − reserved`, what new requests can spend;
 * - bucket levels are split into `used` and what lease slices hold.
 *
 * Requests count against the rate limits when admitted from the store (their
 * token estimate corrected at settlement); a request taken from a lease counts
 * as the lease's (reserved) until it is settled, then as used.
 * Everything is read as one consistent snapshot (see `readSnapshot`).
 */
import { foldDebt, type Usage } from "./credits.ts";
import { HOLD_SIDES, holdKey } from "./holds.ts";
import {
  balanceKey,
  creditRefundKey,
  debtKey,
  type KeyRecord,
  parseState,
  reqRefundKey,
  stateKey,
  tokOverKey,
  tokRefundKey,
  u64,
  USAGE_FIELDS,
  USAGE_PENDING_PREFIX,
  usageKey,
} from "../keys/mod.ts";
import { deferredConsistent, deferredTotals, readDeferred } from "../store/mod.ts";
import { foldTokens, limitsFor, rateHeaders, type TierLimits, type Tiers } from "./rate_limit.ts";

export interface KeyFigures {
  /** Credits given minus credits spent by settled requests (nano). */
  balance: bigint;
  /** Credits every replica holds for requests in flight and quota lease slices (nano). */
  reserved: bigint;
  /** `balance − reserved`: what new requests can spend (nano). */
  available: bigint;
  /** Totals of settled requests. */
  usage: Usage;
  rate: RateFigures;
}

export interface RateFigures {
  limits: TierLimits;
  /** Bucket levels without what lease slices hold (whole, rounded up). */
  requests: number;
  tokens: number;
  /** What lease slices hold in the buckets: unused, or taken by unsettled requests (rounded down). */
  requestsReserved: number;
  tokensReserved: number;
  /** Seconds until both buckets (without the lease slices) are empty. */
  resetSeconds: number;
}

/** The account entries read, in this order. */
const ACCOUNT_KEYS = (id: string): Deno.KvKey[] => [
  balanceKey(id),
  debtKey(id),
  stateKey(id),
  creditRefundKey(id),
  tokRefundKey(id),
  tokOverKey(id),
  reqRefundKey(id),
  ...USAGE_FIELDS.map((f) => usageKey(id, f)),
];

/** One replica's hold ledger for a key: the `HOLD_SIDES` values, in that order. */
export type HoldCounters = bigint[];

/** What is still open on one side pair; a replica refunded while alive may close more than it held. */
function open(reserved: bigint, closed: bigint): bigint {
  return reserved > closed ? reserved - closed : 0n;
}

/**
 * The figures of `key` at `nowMs` from its account entries (in `ACCOUNT_KEYS`
 * order) and each replica's hold counters. Pure: the tests call it directly.
 */
export function figuresOf(
  key: KeyRecord,
  tiers: Tiers,
  nowMs: number,
  account: unknown[],
  holds: HoldCounters[],
): KeyFigures {
  const [b, d, s, cr, tr, to, rr, ...usage] = account;
  const state = parseState(s);
  const fold = foldDebt(state, u64(b), u64(d), u64(cr));
  const available = fold.balance - fold.unpaid;
  let reserved = 0n, reqHeld = 0n, tokHeld = 0n;
  for (const h of holds) {
    reserved += open(h[0], h[1]);
    reqHeld += open(h[2], h[3]);
    tokHeld += open(h[4], h[5]);
  }
  const limits = limitsFor(key, tiers);
  const level = foldTokens(state, limits, nowMs, u64(tr), u64(to), u64(rr));
  // A slice drains with the bucket: what it still holds there is at most the level.
  const reqInBucket = Math.min(level.req, Number(reqHeld));
  const tokInBucket = Math.min(level.tok, Number(tokHeld));
  const usedReq = level.req - reqInBucket;
  const usedTok = level.tok - tokInBucket;
  const [requests, prompt_tokens, completion_tokens, spent_nano] = usage.map(u64);
  return {
    balance: available + reserved,
    reserved,
    available,
    usage: { requests, prompt_tokens, completion_tokens, spent_nano },
    rate: {
      limits,
      // max(0, …): Math.ceil of a tiny negative is -0.
      requests: Math.max(0, Math.ceil(usedReq - 1e-9)),
      tokens: Math.max(0, Math.ceil(usedTok - 1e-9)),
      requestsReserved: Math.floor(reqInBucket + 1e-9),
      tokensReserved: Math.floor(tokInBucket + 1e-9),
      resetSeconds: Number(rateHeaders(limits, usedReq, usedTok)["X-RateLimit-Reset"]),
    },
  };
}

/** Reads `keys` (any number) in getMany calls of at most 10. */
async function readAll(kv: Deno.Kv, keys: Deno.KvKey[]): Promise<Deno.KvEntryMaybe<unknown>[]> {
  const chunks: Deno.KvKey[][] = [];
  for (let i = 0; i < keys.length; i += 10) chunks.push(keys.slice(i, i + 10));
  return (await Promise.all(chunks.map((c) => kv.getMany(c)))).flat();
}

async function listInstances(kv: Deno.Kv): Promise<Deno.KvEntry<unknown>[]> {
  const out: Deno.KvEntry<unknown>[] = [];
  for await (const e of kv.list({ prefix: ["hold_instances"] })) out.push(e);
  return out;
}

const stamps = (es: { versionstamp: string | null }[]) => es.map((e) => e.versionstamp).join();

/** Tries before settling for a read that raced a write (the figures are then a few ms apart). */
const SNAPSHOT_TRIES = 8;

/**
 * The account entries and every replica's hold counters for `keyId`, as of
 * one moment. They span several `getMany` calls (10 keys each) and a list,
 * so they are read twice: when no versionstamp moved in between, every value
 * read was current at the end of the first read, so the set is consistent
 * (a settlement's refund and its hold closing are never seen half-landed).
 */
async function readSnapshot(
  kv: Deno.Kv,
  keyId: string,
): Promise<{ account: unknown[]; holds: HoldCounters[] }> {
  let last: { account: unknown[]; holds: HoldCounters[] } | undefined;
  const accountKeys = ACCOUNT_KEYS(keyId);
  const n = accountKeys.length;
  for (let i = 0; i < SNAPSHOT_TRIES; i++) {
    // Usage deltas not yet applied (store/deferred_sums.ts): read around the counters.
    const [pendingBefore, instances] = await Promise.all([
      readDeferred(kv, USAGE_PENDING_PREFIX),
      listInstances(kv),
    ]);
    const keys = [
      ...accountKeys,
      ...instances.flatMap((e) => HOLD_SIDES.map((side) => holdKey(String(e.key[1]), keyId, side))),
    ];
    const first = await readAll(kv, keys);
    const [again, second, pending] = await Promise.all([
      listInstances(kv),
      readAll(kv, keys),
      readDeferred(kv, USAGE_PENDING_PREFIX),
    ]);
    const deltas = deferredTotals(pending);
    const holds: HoldCounters[] = [];
    for (let j = n; j < first.length; j += HOLD_SIDES.length) {
      holds.push(
        first.slice(j, j + HOLD_SIDES.length).map((e, s) => u64(e.value) + deltas.of(keys[j + s])),
      );
    }
    // Only counters have deltas; the other entries (the state object) pass as read.
    const account = first.slice(0, n).map((e, j) => {
      const d = deltas.of(accountKeys[j]);
      return d === 0n ? e.value : new Deno.KvU64(u64(e.value) + d);
    });
    last = { account, holds };
    if (
      stamps(first) === stamps(second) &&
      stamps(instances) === stamps(again) &&
      instances.map((e) => String(e.key[1])).join() === again.map((e) => String(e.key[1])).join() &&
      deferredConsistent(pendingBefore, pending)
    ) {
      return last;
    }
  }
  return last!;
}

/** `key`'s figures now (see the module doc). */
export async function readKeyFigures(
  kv: Deno.Kv,
  key: KeyRecord,
  tiers: Tiers,
  nowMs: number,
): Promise<KeyFigures> {
  const { account, holds } = await readSnapshot(kv, key.key_id);
  return figuresOf(key, tiers, nowMs, account, holds);
}
