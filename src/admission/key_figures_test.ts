import assert from "node:assert/strict";
import { GroupCommitter } from "../store/group_commit.ts";
import { DeferredSums } from "../store/deferred_sums.ts";
import { usagePendingKey } from "../keys/kv_layout.ts";
import { createAdmitter } from "./admission.ts";
import { getBalance } from "./credits.ts";
import { createKey } from "../keys/keys.ts";
import { figuresOf, readKeyFigures } from "./key_figures.ts";
import { EMPTY_STATE } from "../keys/kv_layout.ts";
import { DEFAULT_TIERS } from "./rate_limit.ts";

const T0 = 1_700_000_010_000;
const now = () => T0;
const est = (i: number) => ({ tokens: 10, costNano: 100n, requestId: `r${i}` });
const used = { promptTokens: 4, completionTokens: 4, costNano: 40n };

Deno.test("key figures: reserved sums every replica's open holds; balance = available + reserved", async () => {
  const kv = await Deno.openKv(":memory:");
  const { record } = await createKey(kv, { tier: "pro", creditsNano: 10_000n, now });
  const gc = new GroupCommitter(kv);
  const a = createAdmitter(kv, { tiers: DEFAULT_TIERS, now, holdInstance: "a" });
  const b = createAdmitter(kv, { tiers: DEFAULT_TIERS, now, holdInstance: "b" });
  const [a1] = await Promise.all([a.admit(record, est(1)), a.admit(record, est(2))]);
  await b.admit(record, est(3));
  await gc.write(a1.settlement(used));
  const f = await readKeyFigures(kv, record, DEFAULT_TIERS, T0);
  // Spent 40 (settled); two requests of 100 in flight, one on each replica.
  assert.equal(f.usage.spent_nano, 40n);
  assert.equal(f.reserved, 200n);
  assert.equal(f.available, 10_000n - 40n - 200n);
  assert.equal(f.available, await getBalance(kv, record.key_id), "what admission can spend");
  assert.equal(f.balance, 10_000n - 40n);
  // Requests count against the rate limit when admitted; no lease holds anything.
  assert.equal(f.rate.requests, 3);
  assert.equal(f.rate.requestsReserved, 0);
  await gc.close();
  kv.close();
});

/**
 * `deferring`: the committer defers usage and hold closings into the replica's
 * pending row (as the gateway's does) and never flushes it before closing: the
 * figures must come out the same, read from the row.
 */
async function leaseFigures(deferring: boolean): Promise<void> {
  const kv = await Deno.openKv(":memory:");
  const { record } = await createKey(kv, { tier: "pro", creditsNano: 1_000_000n, now });
  const deferred = new DeferredSums({
    row: usagePendingKey("solo"),
    flushMs: 3_600_000,
    maxEntries: 64,
    now,
  });
  const gc = new GroupCommitter(kv, deferring ? { deferred } : {});
  const admitter = createAdmitter(kv, {
    tiers: DEFAULT_TIERS,
    now,
    piggyback: gc,
    soleReplica: () => Promise.resolve(true),
    holdInstance: "solo",
    // Frozen: the lease stays live until the admitter closes.
    monotonic: () => 0,
  });
  const adm = await admitter.admit(record, est(1));
  let f = await readKeyFigures(kv, record, DEFAULT_TIERS, T0);
  // The slice: 64 requests (600 rpm), 640 tokens, 6,400 nano (64 requests' worth).
  assert.deepEqual(
    [f.rate.requests, f.rate.requestsReserved, f.rate.tokens, f.rate.tokensReserved],
    [1, 64, 10, 640],
  );
  assert.equal(f.reserved, 100n + 6_400n, "the request in flight and the slice");
  assert.equal(f.balance, 1_000_000n, "nothing spent yet");
  assert.equal(f.available, 1_000_000n - 6_500n);

  await gc.write(adm.settlement(used));
  f = await readKeyFigures(kv, record, DEFAULT_TIERS, T0);
  assert.equal(f.reserved, 6_400n);
  assert.equal(f.balance, 1_000_000n - 40n);
  assert.equal(f.rate.tokens, 8, "the token estimate settled to the real use");

  // A request taken from the lease is the lease's until it is settled, then used.
  const second = await admitter.admit(record, est(2));
  f = await readKeyFigures(kv, record, DEFAULT_TIERS, T0);
  assert.deepEqual([f.rate.requests, f.rate.requestsReserved], [1, 64]);
  assert.equal(f.reserved, 6_400n, "63 unused reservations and one in flight");
  await gc.write(second.settlement(used));
  f = await readKeyFigures(kv, record, DEFAULT_TIERS, T0);
  assert.deepEqual(
    [f.rate.requests, f.rate.requestsReserved, f.rate.tokens, f.rate.tokensReserved],
    [2, 63, 16, 630],
  );
  assert.deepEqual([f.reserved, f.balance], [6_300n, 1_000_000n - 80n]);

  await admitter.close();
  await gc.close();
  f = await readKeyFigures(kv, record, DEFAULT_TIERS, T0);
  assert.deepEqual(
    [f.reserved, f.balance, f.available],
    [0n, 1_000_000n - 80n, 1_000_000n - 80n],
  );
  assert.deepEqual(
    [f.rate.requests, f.rate.requestsReserved, f.rate.tokens, f.rate.tokensReserved],
    [2, 0, 16, 0],
  );
  assert.equal(f.usage.requests, 2n);
  if (deferring) {
    assert.equal((await kv.get(usagePendingKey("solo"))).value, null, "applied on close");
  }
  kv.close();
}

Deno.test("key figures: one request with a quota lease reads as one request, the slice as reserved", () =>
  leaseFigures(false));

Deno.test("key figures: the same with usage and hold closings waiting in the replica's pending row", () =>
  leaseFigures(true));

Deno.test("key figures: a slice drains with its bucket; what it holds is at most the level", () => {
  const key = {
    key_id: "k",
    name: "",
    tier: "free" as const, // 60 rpm: one request drains per second
    created_at: 0,
    revoked_at: null,
    digest: "00",
  };
  const state = { ...EMPTY_STATE, at: T0, req: 8, tok: 80 };
  const holds = [[0n, 0n, 7n, 0n, 70n, 0n]];
  const at = (ms: number) =>
    figuresOf(key, DEFAULT_TIERS, T0 + ms, [null, null, state], holds).rate;
  assert.deepEqual([at(0).requests, at(0).requestsReserved], [1, 7]);
  assert.deepEqual([at(500).requests, at(500).requestsReserved], [1, 7]);
  // 2 s later the level is 6: all of it is the slice's (the hand-back would empty it).
  assert.deepEqual([at(2_000).requests, at(2_000).requestsReserved], [0, 6]);
  // A replica refunded while alive may close more than it reserved: never negative.
  const over = figuresOf(key, DEFAULT_TIERS, T0, [null, null, state], [[5n, 9n, 0n, 3n, 0n, 0n]]);
  assert.equal(over.reserved, 0n);
  assert.equal(over.rate.requests, 8);
});
