import assert from "node:assert/strict";
import { GroupCommitter } from "../store/group_commit.ts";
import { dailyUsageWrites, dayOf, dayRange, readDailyUsage } from "./usage_daily.ts";

const T = Date.parse("2026-11-24T12:00:00Z");

Deno.test("dayRange: defaults, bounds and malformed dates", () => {
  assert.deepEqual(dayRange(null, null, T), { from: "2026-10-26", to: "2026-11-24" });
  assert.deepEqual(dayRange("2026-11-01", "2026-11-01", T), {
    from: "2026-11-01",
    to: "2026-11-01",
  });
  assert.deepEqual(dayRange(null, "2026-03-01", T), { from: "2026-01-31", to: "2026-03-01" });
  for (
    const [f, t, re] of [
      ["2026-02-30", null, /from must be a date/],
      ["20261101", null, /from must be a date/],
      [null, "tomorrow", /to must be a date/],
      ["2026-11-02", "2026-11-01", /not be after/],
      ["2024-01-01", "2026-01-01", /at most 366/],
    ] as const
  ) {
    assert.throws(() => dayRange(f, t, T), re);
  }
});

Deno.test("daily usage: sums per day and model, read back by range only for that key", async () => {
  const kv = await Deno.openKv(":memory:");
  const gc = new GroupCommitter(kv);
  const u = { promptTokens: 10, completionTokens: 5, costNano: 7n };
  await gc.write([
    ...dailyUsageWrites("key_a", "m/one", T, u),
    ...dailyUsageWrites("key_a", "m/one", T + 1000, u),
    ...dailyUsageWrites("key_a", "m/two", T, u),
    ...dailyUsageWrites("key_a", "m/one", T - 86_400_000, u),
    ...dailyUsageWrites("key_b", "m/one", T, u),
  ]);
  const today = await readDailyUsage(kv, "key_a", { from: dayOf(T), to: dayOf(T) });
  assert.deepEqual(today.map((r) => [r.date, r.model, r.requests, r.prompt_tokens, r.spent_nano]), [
    ["2026-11-24", "m/one", 2n, 20n, 14n],
    ["2026-11-24", "m/two", 1n, 10n, 7n],
  ]);
  const both = await readDailyUsage(kv, "key_a", { from: "2026-11-23", to: "2026-11-24" });
  assert.equal(both.length, 3);
  assert.equal(
    (await readDailyUsage(kv, "key_b", { from: "2026-11-23", to: "2026-11-24" })).length,
    1,
  );
  await gc.close();
  kv.close();
});
