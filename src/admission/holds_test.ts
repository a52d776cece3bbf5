import assert from "node:assert/strict";
import { GroupCommitter } from "../store/group_commit.ts";
import { createAdmitter } from "./admission.ts";
import { getBalance, getUsage } from "./credits.ts";
import { createKey } from "../keys/keys.ts";
import { holdFenceKey, holdInstanceKey, holdKey, recoverHolds } from "./holds.ts";
import { usageKey, usagePendingKey } from "../keys/mod.ts";
import { DEFAULT_TIERS } from "./rate_limit.ts";

const T0 = 1_700_000_010_000;
const now = () => T0;
const est = (i: number) => ({ tokens: 10, costNano: 100n, requestId: `r${i}` });

Deno.test("holds: unsettled reservations of a gone instance are refunded once; a live one's are not", async () => {
  const kv = await Deno.openKv(":memory:");
  const { record } = await createKey(kv, { tier: "pro", creditsNano: 10_000n, now });
  const gc = new GroupCommitter(kv);
  const dead = createAdmitter(kv, { tiers: DEFAULT_TIERS, now, holdInstance: "dead" });
  const live = createAdmitter(kv, { tiers: DEFAULT_TIERS, now, holdInstance: "live" });
  // Dead: 5 admitted, 2 settled (one at 40 of its 100), 3 in flight at the "crash".
  const d = await Promise.all([0, 1, 2, 3, 4].map((i) => dead.admit(record, est(i))));
  await gc.write(d[0].settlement({ promptTokens: 1, completionTokens: 1, costNano: 40n }));
  await gc.write(d[1].settlement({ promptTokens: 1, completionTokens: 1, costNano: 100n }));
  // Live: 2 in flight.
  await Promise.all([5, 6].map((i) => live.admit(record, est(i))));
  assert.equal(await getBalance(kv, record.key_id), 10_000n - 140n - 500n);
  // A lease's requests and tokens, as a granted slice leaves them in the ledger.
  await kv.atomic()
    .sum(holdKey("dead", record.key_id, "req_reserved"), 8n)
    .sum(holdKey("dead", record.key_id, "tok_reserved"), 80n)
    .commit();
  // Two processes recover at once: the refund happens once.
  const liveIds = () => Promise.resolve(new Set(["live"]));
  const [r1, r2] = await Promise.all([
    recoverHolds(kv, { self: "x", live: liveIds }),
    recoverHolds(kv, { self: "y", live: liveIds }),
  ]);
  assert.equal(r1.refundedNano + r2.refundedNano, 300n);
  // What is left: given − spent − the live instance's two reservations.
  assert.equal(await getBalance(kv, record.key_id), 10_000n - 140n - 200n);
  assert.equal((await kv.get(holdInstanceKey("dead"))).value, null);
  assert.equal((await Array.fromAsync(kv.list({ prefix: ["hold", "dead"] }))).length, 0);
  assert.notEqual((await kv.get(holdInstanceKey("live"))).value, null);
  // A later round finds nothing more to refund.
  assert.equal((await recoverHolds(kv, { self: "x", live: liveIds })).refundedNano, 0n);
  await gc.close();
  kv.close();
});

Deno.test("holds: a gone instance's pending usage row is applied once after fencing; a live one's is left", async () => {
  const kv = await Deno.openKv(":memory:");
  const row = (id: string, n: bigint) =>
    kv.set(usagePendingKey(id), { epoch: 0, entries: [[usageKey("k1", "requests"), n]] });
  // "gone" held nothing (an unlimited key): it has a pending row and no ledger.
  await row("gone", 3n);
  await row("live", 5n);
  const liveIds = () => Promise.resolve(new Set(["live"]));
  await Promise.all([
    recoverHolds(kv, { self: "x", live: liveIds }),
    recoverHolds(kv, { self: "y", live: liveIds }),
  ]);
  const requests = (await kv.get(usageKey("k1", "requests"))).value;
  assert.deepEqual(requests, new Deno.KvU64(3n));
  assert.equal((await kv.get(usagePendingKey("gone"))).value, null);
  assert.notEqual((await kv.get(usagePendingKey("live"))).value, null);
  // Fenced: the gone instance's committer can write its row no more.
  assert.notEqual((await kv.get(holdFenceKey("gone"))).value, null);
  // Readers count the live row on top of the counter.
  assert.equal((await getUsage(kv, "k1")).requests, 8n);
  kv.close();
});
