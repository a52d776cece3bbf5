import assert from "node:assert/strict";
import { GatewayError } from "../http/errors.ts";
import { GroupCommitter } from "../store/group_commit.ts";
import { createAdmitter } from "./admission.ts";
import { createKey } from "./keys.ts";
import { EMPTY_STATE } from "./kv_layout.ts";
import {
  DEFAULT_TIERS,
  foldTokens,
  limitsFor,
  readRateWindow,
  WINDOW_MS,
  windowOf,
} from "./rate_limit.ts";

// 15 s into a window, so Reset is 45 s.
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
  assert.equal(h["X-RateLimit-Reset"], "45");
  assert.equal(h["X-RateLimit-Limit-Tokens"], "100000");
  for (const r of rejected) {
    assert.ok(r.status === "rejected" && isRateLimited(r.reason));
    assert.equal(r.reason.headers["Retry-After"], "45");
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
  // Real usage was 20k: 40k tokens come back to this window.
  await gc.write(a.settlement({ promptTokens: 15_000, completionTokens: 5_000, costNano: 1n }));
  const b = await admitter.admit(record, est(4, 50_000));
  assert.equal(b.headers["X-RateLimit-Remaining-Tokens"], "30000");
  // An overrun counts against the window too.
  await gc.write(b.settlement({ promptTokens: 50_000, completionTokens: 10_000, costNano: 1n }));
  const view = await readRateWindow(kv, record, DEFAULT_TIERS, c.now());
  assert.equal(view.tokens, 80_000);
  assert.equal(view.requests, 2);
  kv.close();
});

Deno.test("the next window starts from zero and drops stale refunds", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const { record } = await createKey(kv, { tier: "free", creditsNano: 10_000n, now: c.now });
  const admitter = createAdmitter(kv, { tiers: DEFAULT_TIERS, now: c.now });
  const gc = new GroupCommitter(kv);
  const first = await Promise.all(
    Array.from({ length: 60 }, (_, i) => admitter.admit(record, est(i, 10))),
  );
  await assert.rejects(admitter.admit(record, est(99)), isRateLimited);
  c.set((windowOf(T0) + 1) * WINDOW_MS);
  // A refund settled in the new window for an old-window request must not credit the new one.
  await gc.write(first[0].settlement({ promptTokens: 0, completionTokens: 0, costNano: 1n }));
  const again = await admitter.admit(record, est(100, 10));
  assert.equal(again.headers["X-RateLimit-Remaining"], "59");
  assert.equal(again.headers["X-RateLimit-Remaining-Tokens"], String(100_000 - 10));
  assert.equal(again.headers["X-RateLimit-Reset"], "60");
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

Deno.test("foldTokens folds same-window refunds and overruns, resets on a new window", () => {
  const s = { ...EMPTY_STATE, window: 5, req: 3, tok: 100, tokRefundSeen: 10n, tokOverSeen: 0n };
  assert.deepEqual(foldTokens(s, 5, 40n, 7n), {
    ...s,
    tok: 77,
    tokRefundSeen: 40n,
    tokOverSeen: 7n,
  });
  assert.deepEqual(foldTokens(s, 6, 40n, 7n), {
    ...s,
    window: 6,
    req: 0,
    tok: 0,
    tokRefundSeen: 40n,
    tokOverSeen: 7n,
  });
  // A counter read that lags the state never folds backwards.
  assert.equal(foldTokens(s, 5, 5n, 0n).tok, 100);
});
