/**
 * Quota leases: a process that is the only live replica on its store reserves
 * a slice of a key's rate buckets and balance in one admission commit, then
 * admits the next requests of that key from the slice in memory, with no KV
 * read or commit before the prompt leaves. The slice is durably reserved
 * (counted as used in the buckets, taken from the balance), so a lease can
 * never over-admit; its unused part goes back either in the next admission
 * commit of the key (folded exactly) or, when idle, as blind refunds.
 *
 * Slices are small: at most an eighth of what is left and `store.lease_max_requests`
 * (default 64) requests' worth,
 * and none is taken unless it holds at least two requests, so near a limit
 * every request is decided against the store as before. A lease running low
 * is renewed in the background (a new slice reserved and added to it), so a
 * steady stream of requests never waits for an admission commit; one getting
 * old is renewed by the pool's sweep rather than by the request that finds it
 * so, whose prompt and first chunk would share the core with that commit.
 */
import type { KvWrite } from "../store/mod.ts";
import { creditRefundKey, reqRefundKey, tokRefundKey } from "../keys/mod.ts";

export interface Lease {
  /** Unused requests, tokens and nano-credits of the slice. */
  req: number;
  tok: number;
  credit: bigint;
  /** The bucket levels as a client sees them (for X-RateLimit-*): slice use only. */
  shownReq: number;
  shownTok: number;
  grantedAt: number;
  lastUse: number;
  /** The slice as last granted (to tell when it runs low). */
  size: Remaining;
}

/** A lease older than this is not used again (its unused part is returned). */
export const LEASE_LIFETIME_MS = 1_000;
/** A lease unused for this long is returned. */
export const LEASE_IDLE_MS = 500;
/** Default of `store.lease_max_requests`: what a crash can leave held until recovery. */
export const LEASE_MAX_REQUESTS = 64;

export interface Remaining {
  req: number;
  tok: number;
  credit: bigint;
}

/**
 * The slice to reserve after a decision left `rem`, sized on a request of `tokens`/`cost`.
 * With `parts` > 1 (the workers of one host, docs/decisions/workers.md) it is a `parts`-th
 * of a sole replica's slice, so all the host's workers together hold at most what one
 * process would.
 */
export function leaseSlice(
  rem: Remaining,
  tokens: number,
  cost: bigint,
  maxRequests = LEASE_MAX_REQUESTS,
  parts = 1,
): Remaining | null {
  const max = Math.floor(maxRequests / parts);
  const div = 8 * parts;
  const req = Math.min(max, Math.floor(rem.req / div));
  const tok = Math.min(max * tokens, Math.floor(rem.tok / div));
  const capCredit = BigInt(max) * cost;
  const credit = rem.credit / BigInt(div) < capCredit ? rem.credit / BigInt(div) : capCredit;
  if (req < 2 || tok < 2 * tokens || credit < 2n * cost || credit < 0n) return null;
  return { req, tok, credit };
}

/** Takes one request from the lease when it fits; mutates the lease. */
export function takeFromLease(
  l: Lease,
  now: number,
  tokens: number,
  cost: bigint,
): boolean {
  if (now - l.grantedAt >= LEASE_LIFETIME_MS || now < l.grantedAt) {
    return false;
  }
  if (l.req < 1 || l.tok < tokens || l.credit < cost) return false;
  l.req--;
  l.tok -= tokens;
  l.credit -= cost;
  l.shownReq++;
  l.shownTok += tokens;
  l.lastUse = now;
  return true;
}

/**
 * Whether a request that took from the lease should have the next slice
 * reserved now, in the background, so that no request waits for an admission
 * commit when this one runs out: a quarter of the slice is left.
 */
export function runningLow(l: Lease): boolean {
  return 4 * l.req <= l.size.req || 4 * l.tok <= l.size.tok || 4n * l.credit <= l.size.credit;
}

/**
 * Whether a lease in use should be renewed before it gets too old to use:
 * half its lifetime has passed. The pool's sweep asks this, off any request's
 * path (lease_pool.ts).
 */
export function pastHalfLife(l: Lease, now: number): boolean {
  return now - l.grantedAt >= LEASE_LIFETIME_MS / 2;
}

/**
 * A renewal's new slice added to the live lease: both are
 * durably reserved, so their sum is; the lifetime restarts with the new slice.
 */
export function mergeLease(live: Lease, fresh: Lease): void {
  live.req += fresh.req;
  live.tok += fresh.tok;
  live.credit += fresh.credit;
  live.grantedAt = fresh.grantedAt;
  live.size = fresh.size;
}

/**
 * Blind writes handing a lease's unused part back (to the buckets, which
 * floor at empty, and to the balance).
 */
export function leaseReturnWrites(keyId: string, l: Lease): KvWrite[] {
  const out: KvWrite[] = [];
  if (l.credit > 0n) out.push({ op: "sum", key: creditRefundKey(keyId), value: l.credit });
  if (l.req > 0) out.push({ op: "sum", key: reqRefundKey(keyId), value: BigInt(l.req) });
  if (l.tok > 0) out.push({ op: "sum", key: tokRefundKey(keyId), value: BigInt(l.tok) });
  return out;
}
