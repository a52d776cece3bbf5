import assert from "node:assert/strict";
import { backoffMs, isTransientKvError, retryTransient } from "./transient.ts";

const locked = () => new TypeError("database is locked");

Deno.test("retryTransient reruns the whole attempt on a transient error, with backoff", async () => {
  const slept: number[] = [];
  let calls = 0;
  const v = await retryTransient(() => {
    calls++;
    return calls < 3 ? Promise.reject(locked()) : Promise.resolve("done");
  }, { random: () => 0.5, sleep: (ms) => (slept.push(ms), Promise.resolve()) });
  assert.equal(v, "done");
  assert.equal(calls, 3);
  assert.deepEqual(slept, [backoffMs(1, () => 0.5), backoffMs(2, () => 0.5)]);
});

Deno.test("retryTransient throws other errors at once, and transient ones after the bound", async () => {
  let calls = 0;
  await assert.rejects(
    retryTransient(() => (calls++, Promise.reject(new RangeError("bad")))),
    RangeError,
  );
  assert.equal(calls, 1);
  calls = 0;
  await assert.rejects(
    retryTransient(() => (calls++, Promise.reject(locked())), {
      maxAttempts: 4,
      sleep: () => Promise.resolve(),
    }),
    /database is locked/,
  );
  assert.equal(calls, 4);
});

Deno.test("isTransientKvError and backoffMs", () => {
  assert.ok(isTransientKvError(locked()));
  assert.ok(isTransientKvError(new Error("SQLITE_BUSY: database is busy")));
  assert.ok(!isTransientKvError(new TypeError("Value too large")));
  assert.equal(backoffMs(1, () => 0), 0.5);
  assert.equal(backoffMs(20, () => 1), 32.5, "the cap holds");
});
