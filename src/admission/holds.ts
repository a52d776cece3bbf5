/**
 * The hold ledger: what each gateway process has reserved
 * from each key's balance and not yet settled or handed back, recorded
 * durably so that a crash (`kill -9`) loses no credits.
 *
 * Every admission commit adds the credits it reserves (requests admitted,
 * lease slices granted) to `["hold", instance, key, "reserved"]`, in the same
 * atomic commit; every settlement and every lease hand-back adds the same
 * amount to `["hold", instance, key, "closed"]`, in the commit that carries
 * it. Both are blind additions to monotonic counters, so they cost the hot path
 * no read: `sum`s, and the closings deferred into the replica's own pending row
 * (store/deferred_sums.ts), applied within a second, and before recovery reads.
 * `reserved − closed` is what the process holds at any moment: its live lease
 * slices and its in-flight requests.
 *
 * Quota leases also reserve requests and tokens from the key's rate buckets:
 * the ledger records those too (`req_reserved` / `tok_reserved` in the commit
 * granting a slice; `req_closed` / `tok_closed` for its unused part when it is
 * handed back or folded back, and for each request taken from it in that
 * request's settlement), so the key figures (key_figures.ts) can tell the
 * buckets' real use from what leases hold.
 *
 * When a process is gone (no live replica announcement), any other process
 * on the store refunds its open holds to the keys (the usual credit refund
 * counter, folded in at the next admission) and deletes them, and applies the
 * usage deltas left in its pending row (store/deferred_sums.ts). Requests that
 * were in flight at the crash are refunded whole: their answer never got a
 * durable receipt.
 *
 * Recovery is fenced: before refunding an instance's holds it
 * writes `["hold_fence", instance]`, and every commit of an instance's own
 * ledger (the group committer's, admission's) checks that its fence is
 * absent. So a process that was alive but paused past its TTL (SIGSTOP, a
 * frozen VM, an event loop stalled) and then resumes cannot settle, hand
 * back or reserve anything under the recovered ledger: its commits fail, its
 * requests get no receipt and are refused, and the key is credited its holds
 * once. The balance never exceeds the credits given minus those spent.
 */
import { foldDeferred, type KvWrite, retryTransient } from "../store/mod.ts";
import { GatewayError } from "../http/mod.ts";
import { creditRefundKey, u64, USAGE_PENDING_PREFIX, usagePendingKey } from "../keys/mod.ts";

/** Credits (nano) reserved/closed; lease slices' requests and tokens reserved/closed. */
export type HoldSide =
  | "reserved"
  | "closed"
  | "req_reserved"
  | "req_closed"
  | "tok_reserved"
  | "tok_closed";

export const HOLD_SIDES: readonly HoldSide[] = [
  "reserved",
  "closed",
  "req_reserved",
  "req_closed",
  "tok_reserved",
  "tok_closed",
];

/** `["hold", instance, key_id, side]` → KvU64 (nano-credits, requests or tokens). */
export const holdKey = (instance: string, keyId: string, side: HoldSide): Deno.KvKey => [
  "hold",
  instance,
  keyId,
  side,
];
/** `["hold_fence", instance]`: set when `instance`'s holds were recovered; it may commit no more. */
export const holdFenceKey = (instance: string): Deno.KvKey => ["hold_fence", instance];

/** How long a fence is kept (a paused process resumes long before, or never). */
const FENCE_MS = 7 * 86_400_000;

/**
 * Thrown by a commit of a fenced instance: not transient, never retried; the
 * client gets a 503 (another replica serves it), the log names the fence.
 */
export class FencedError extends GatewayError {
  constructor(instance: string) {
    super(
      "unavailable",
      `replica ${instance} was fenced (another replica recovered its holds); retry shortly`,
    );
  }
}

/** Whether `instance` was fenced (read after a commit that checked the fence failed). */
export async function isFenced(
  kv: Pick<Deno.Kv, "getMany">,
  instance: string,
): Promise<boolean> {
  const [f] = await kv.getMany([holdFenceKey(instance)]);
  return f.versionstamp !== null;
}

/** `["hold_instances", instance]` → epoch ms of its first hold: instances to check. */
export const holdInstanceKey = (instance: string): Deno.KvKey => ["hold_instances", instance];

/**
 * Closes `nano` of `instance`'s hold on a key (a settlement, a lease hand-back).
 * Deferred (store/deferred_sums.ts): the closing waits in the replica's pending
 * row, which recovery applies before it reads the ledger, and the key figures add.
 */
export function holdClosedWrites(instance: string, keyId: string, nano: bigint): KvWrite[] {
  return nano > 0n ? [{ op: "defer", key: holdKey(instance, keyId, "closed"), value: nano }] : [];
}

/** Closes a lease's `req` requests and `tok` tokens in `instance`'s ledger. */
export function holdRateClosedWrites(
  instance: string,
  keyId: string,
  req: number,
  tok: number,
): KvWrite[] {
  const out: KvWrite[] = [];
  if (req > 0) {
    out.push({ op: "defer", key: holdKey(instance, keyId, "req_closed"), value: BigInt(req) });
  }
  if (tok > 0) {
    out.push({ op: "defer", key: holdKey(instance, keyId, "tok_closed"), value: BigInt(tok) });
  }
  return out;
}

export interface Recovery {
  instances: number;
  refundedNano: bigint;
}

/**
 * Refunds the open holds of every instance that `live` does not list (and
 * that is not `self`), then forgets them. Safe to run from several processes
 * at once: each key's refund is one commit checked against the counters it
 * read, so it happens once.
 */
export async function recoverHolds(
  kv: Deno.Kv,
  opts: { self: string; live: () => Promise<Set<string>> },
): Promise<Recovery> {
  const out: Recovery = { instances: 0, refundedNano: 0n };
  const instances: Deno.KvEntry<unknown>[] = [];
  for await (const e of kv.list({ prefix: ["hold_instances"] })) instances.push(e);
  // Replicas whose usage deltas still wait in their pending row (some hold nothing).
  const pendingRows: string[] = [];
  for await (const e of kv.list({ prefix: USAGE_PENDING_PREFIX })) {
    if (typeof e.key[1] === "string") pendingRows.push(e.key[1]);
  }
  if (instances.length === 0 && pendingRows.length === 0) return out;
  const live = await opts.live();
  const dead = (id: unknown): id is string =>
    typeof id === "string" && id !== opts.self && !live.has(id);
  // Fenced first: from here on the instance cannot commit to its ledger or its pending
  // row, so what is read below is final, and refunded or applied once.
  const fence = (id: string) =>
    retryTransient(() => kv.atomic().set(holdFenceKey(id), id, { expireIn: FENCE_MS }).commit());
  const held = new Set(instances.map((e) => e.key[1]));
  for (const id of pendingRows) {
    if (!dead(id) || held.has(id)) continue;
    await fence(id);
    await retryTransient(() => foldDeferred(kv, usagePendingKey(id)));
  }
  for (const inst of instances) {
    const id = inst.key[1];
    if (!dead(id)) continue;
    await fence(id);
    await retryTransient(() => foldDeferred(kv, usagePendingKey(id)));
    const keys = new Set<string>();
    for await (const h of kv.list({ prefix: ["hold", id] })) {
      if (typeof h.key[2] === "string") keys.add(h.key[2]);
    }
    let complete = true;
    for (const keyId of keys) {
      const refunded = await retryTransient(async () => {
        const [r, c] = await kv.getMany([
          holdKey(id, keyId, "reserved"),
          holdKey(id, keyId, "closed"),
        ]);
        const open = u64(r.value) - u64(c.value);
        const op = kv.atomic().check(r).check(c);
        // The rate sides are only forgotten: a replica is recovered a whole TTL
        // after its last heartbeat, while its buckets drained at their full rate.
        for (const side of HOLD_SIDES) op.delete(holdKey(id, keyId, side));
        if (open > 0n) op.sum(creditRefundKey(keyId), open);
        const res = await op.commit();
        return res.ok ? (open > 0n ? open : 0n) : null;
      });
      // null: another process recovered this key meanwhile; the next round re-checks.
      if (refunded === null) complete = false;
      else out.refundedNano += refunded;
    }
    if (complete) {
      await retryTransient(() => kv.atomic().check(inst).delete(inst.key).commit());
      out.instances++;
    }
  }
  return out;
}
