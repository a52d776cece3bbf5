import assert from "node:assert/strict";
import { GatewayError } from "../http/errors.ts";
import { GroupCommitter } from "../store/group_commit.ts";
import { createAdmitter } from "./admission.ts";
import { createKey } from "../keys/keys.ts";
import { EMPTY_STATE } from "../keys/kv_layout.ts";
import { DEFAULT_TIERS, foldTokens, limitsFor, readRateWindow, WINDOW_MS } from "./rate_limit.ts";

// 15 s into a minute: a fixed window would reset 45 s from here.
const T0 = 28_333_333 * WINDOW_MS + 15_000;

function clock(start = T0) {
  let t = start;
  return { now: () => t, set: (v: number) => (t = v) };
}

function isRateLimited(e: unknown): e is GatewayError {
  return e instanceof GatewayError && e.kind === "rate_limited" && e.status === 429;
}

const est = (i: number, tokens = 1) => ({ tokens, costNano: 1n, requestId: `r${i}` });

Deno.test("100 parallel admits against rpm 60 admit exactly 60, with headers", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const { record } = await createKey(kv, { tier: "free", creditsNano: 10_000n, now: c.now });
  const admitter = createAdmitter(kv, { tiers: DEFAULT_TIERS, now: c.now });
  const results = await Promise.allSettled(
    Array.from({ length: 100 }, (_, i) => admitter.admit(record, est(i))),
  );
  const ok = results.filter((r) => r.status === "fulfilled");
  const rejected = results.filter((r) => r.status === "rejected");
  assert.equal(ok.length, 60);
  assert.equal(rejected.length, 40);
  const remaining = ok.map((r) => r.status === "fulfilled" ? r.value.headers : {}).map((h) =>
    Number(h["X-RateLimit-Remaining"])
  ).sort((a, b) => a - b);
  assert.deepEqual(remaining, Array.from({ length: 60 }, (_, i) => i));
  const h = ok[0].status === "fulfilled" ? ok[0].value.headers : {};
  assert.equal(h["X-RateLimit-Limit"], "60");
  // Reset: seconds until the request bucket is empty again (60 requests at 1/s).
  const resets = ok.map((r) =>
    r.status === "fulfilled" ? Number(r.value.headers["X-RateLimit-Reset"]) : 0
  );
  assert.equal(Math.max(...resets), 60);
  assert.equal(h["X-RateLimit-Limit-Tokens"], "100000");
  for (const r of rejected) {
    assert.ok(r.status === "rejected" && isRateLimited(r.reason));
    // The next request fits once one request's worth has drained: 1 s at 60/min.
    assert.equal(r.reason.headers["Retry-After"], "1");
    assert.equal(r.reason.headers["X-RateLimit-Remaining"], "0");
    assert.equal(r.reason.headers["X-RateLimit-Limit"], "60");
  }
  kv.close();
});

Deno.test("tokens per minute: estimates are admitted, then settled to real usage", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const { record } = await createKey(kv, { tier: "free", creditsNano: 10_000n, now: c.now });
  const admitter = createAdmitter(kv, { tiers: DEFAULT_TIERS, now: c.now });
  const gc = new GroupCommitter(kv);
  const a = await admitter.admit(record, est(1, 60_000));
  assert.equal(a.headers["X-RateLimit-Remaining-Tokens"], "40000");
  await assert.rejects(admitter.admit(record, est(2, 50_000)), (e: unknown) => {
    assert.ok(isRateLimited(e));
    assert.match(e.message, /tokens per minute/);
    return true;
  });
  await assert.rejects(admitter.admit(record, est(3, 100_001)), isRateLimited);
  // Real usage was 20k: 40k tokens come back to the bucket.
  await gc.write(a.settlement({ promptTokens: 15_000, completionTokens: 5_000, costNano: 1n }));
  const b = await admitter.admit(record, est(4, 50_000));
  assert.equal(b.headers["X-RateLimit-Remaining-Tokens"], "30000");
  // An overrun counts against the bucket too.
  await gc.write(b.settlement({ promptTokens: 50_000, completionTokens: 10_000, costNano: 1n }));
  const view = await readRateWindow(kv, record, DEFAULT_TIERS, c.now());
  assert.equal(view.tokens, 80_000);
  assert.equal(view.requests, 2);
  kv.close();
});

Deno.test("the buckets refill continuously: no window boundary doubles the burst", async () => {
  const kv = await Deno.openKv(":memory:");
  // Just before a minute boundary, where fixed windows allowed 2 × rpm within a second.
  const c = clock(28_333_334 * WINDOW_MS - 500);
  const { record } = await createKey(kv, { tier: "free", creditsNano: 10_000n, now: c.now });
  const admitter = createAdmitter(kv, { tiers: DEFAULT_TIERS, now: c.now });
  const gc = new GroupCommitter(kv);
  const first = await Promise.all(
    Array.from({ length: 60 }, (_, i) => admitter.admit(record, est(i, 10))),
  );
  await assert.rejects(admitter.admit(record, est(99)), isRateLimited);
  // Across the boundary (1 s later): one request's worth has refilled, not a whole minute.
  c.set(c.now() + 1_000);
  const results = await Promise.allSettled(
    Array.from({ length: 60 }, (_, i) => admitter.admit(record, est(100 + i, 10))),
  );
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
  // A refund settled later goes back into the token bucket (never below empty).
  await gc.write(first[0].settlement({ promptTokens: 0, completionTokens: 0, costNano: 1n }));
  // 30 s on: half the bucket has drained.
  c.set(c.now() + 30_000);
  const again = await admitter.admit(record, est(200, 10));
  assert.equal(again.headers["X-RateLimit-Remaining"], "29");
  assert.equal(again.headers["X-RateLimit-Reset"], "31");
  // A full minute idle empties it.
  c.set(c.now() + 60_000);
  const later = await Promise.allSettled(
    Array.from({ length: 70 }, (_, i) => admitter.admit(record, est(300 + i, 10))),
  );
  assert.equal(later.filter((r) => r.status === "fulfilled").length, 60);
  kv.close();
});

Deno.test("enterprise keys use their own limits", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const { record } = await createKey(kv, {
    tier: "enterprise",
    rpm: 3,
    tpm: 1_000,
    creditsNano: 10_000n,
    now: c.now,
  });
  assert.deepEqual(limitsFor(record, DEFAULT_TIERS), { rpm: 3, tpm: 1_000 });
  const admitter = createAdmitter(kv, { tiers: DEFAULT_TIERS, now: c.now });
  const results = await Promise.allSettled(
    Array.from({ length: 10 }, (_, i) => admitter.admit(record, est(i))),
  );
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 3);
  kv.close();
});

Deno.test("foldTokens drains at the per-minute rates and folds refunds and overruns", () => {
  const limits = { rpm: 60, tpm: 6_000 };
  const s = { ...EMPTY_STATE, at: 1_000, req: 3, tok: 100, tokRefundSeen: 10n, tokOverSeen: 0n };
  assert.deepEqual(foldTokens(s, limits, 1_000, 40n, 7n), {
    ...s,
    tok: 77,
    tokRefundSeen: 40n,
    tokOverSeen: 7n,
  });
  // 1 s later: one request and 100 tokens drained.
  assert.deepEqual(foldTokens(s, limits, 2_000, 10n, 0n), { ...s, at: 2_000, req: 2, tok: 0 });
  // Never below empty, and a clock behind the state drains nothing.
  assert.equal(foldTokens(s, limits, 100_000, 10n, 0n).req, 0);
  assert.equal(foldTokens(s, limits, 500, 10n, 0n).tok, 100);
  // A counter read that lags the state never folds backwards.
  assert.equal(foldTokens(s, limits, 1_000, 5n, 0n).tok, 100);
});
