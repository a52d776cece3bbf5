/**
 * Admission's one atomic write per batch: every changed account's balance and
 * state, checked against the versionstamps read, with the hold ledger's sums;
 * and, when it has room, blind writes borrowed from the group committer
 * (receipts, settlements) riding the same commit.
 */
import { applyWrites } from "../store/mod.ts";
import { holdFenceKey, holdInstanceKey, holdKey } from "./holds.ts";
import { balanceKey, stateKey } from "../keys/mod.ts";
import type { Working } from "./admission_decide.ts";
import type { AdmissionKv, CommitLane } from "./admission_types.ts";

/** Room left in an admission commit for borrowed writes (KV allows 1000 mutations, 800 KB). */
const PIGGYBACK_MUTATIONS = 600;
const PIGGYBACK_BYTES = 400_000;

/**
 * The atomic writing every admitted account of `work`, or null when nothing
 * changed. With `holdInstance` it sums the holds, and registers the instance
 * in the ledger while `register` is set.
 */
export function batchAtomic(
  kv: AdmissionKv,
  work: Map<string, Working>,
  holdInstance: string | undefined,
  register: boolean,
  t: number,
): Deno.AtomicOperation | null {
  const atomic = kv.atomic();
  let writes = 0;
  for (const [id, w] of work) {
    if (!w.admitted) continue;
    const [b, s] = w.entries;
    atomic.check(b).check(s)
      .set(balanceKey(id), new Deno.KvU64(w.balance))
      .set(stateKey(id), w.state);
    if (holdInstance !== undefined) {
      if (w.held > 0n) atomic.sum(holdKey(holdInstance, id, "reserved"), w.held);
      if (w.released > 0n) atomic.sum(holdKey(holdInstance, id, "closed"), w.released);
      const r = w.rate;
      if (r.heldReq > 0) atomic.sum(holdKey(holdInstance, id, "req_reserved"), BigInt(r.heldReq));
      if (r.heldTok > 0) atomic.sum(holdKey(holdInstance, id, "tok_reserved"), BigInt(r.heldTok));
      if (r.closedReq > 0) atomic.sum(holdKey(holdInstance, id, "req_closed"), BigInt(r.closedReq));
      if (r.closedTok > 0) atomic.sum(holdKey(holdInstance, id, "tok_closed"), BigInt(r.closedTok));
    }
    writes++;
  }
  if (writes === 0) return null;
  // A replica whose holds another recovered reserves nothing more (holds.ts, the fence).
  if (holdInstance !== undefined) {
    atomic.check({ key: holdFenceKey(holdInstance), versionstamp: null });
  }
  if (holdInstance !== undefined && register) atomic.set(holdInstanceKey(holdInstance), t);
  return atomic;
}

/**
 * Commits `atomic` in the group committer's lane (taking turns with its
 * commits), carrying the writes queued behind them when there is room; the
 * lent writes are settled with the commit's outcome.
 */
export function commitInLane(
  atomic: Deno.AtomicOperation,
  lane: CommitLane | undefined,
): Promise<Deno.KvCommitResult | Deno.KvCommitError> {
  const commit = async () => {
    const lent = lane?.borrow(PIGGYBACK_MUTATIONS, PIGGYBACK_BYTES) ?? null;
    if (lent) applyWrites(atomic, lent.ops);
    let r: Deno.KvCommitResult | Deno.KvCommitError;
    try {
      r = await atomic.commit();
    } catch (e) {
      lent?.settle(false);
      throw e;
    }
    lent?.settle(r.ok);
    return r;
  };
  return lane ? lane.exclusive(commit) : commit();
}
