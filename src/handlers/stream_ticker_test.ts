import assert from "node:assert/strict";
import { StreamTicker, tickPeriodMs } from "./stream_ticker.ts";

/**
 * A tick that records its calls and lets the test wait for the n-th one. The
 * tests wait on ticks, never on wall time: a loaded machine runs the timer
 * late, which changes how long they take, not what they see.
 */
function recorder() {
  const seen: number[] = [];
  const waiters: { n: number; done: () => void }[] = [];
  return {
    seen,
    tick(now: number) {
      seen.push(now);
      for (const w of waiters.filter((w) => seen.length >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.done();
      }
    },
    /** Resolves once the tick has been called `n` times in all. */
    calls(n: number): Promise<void> {
      if (seen.length >= n) return Promise.resolve();
      return new Promise((done) => waiters.push({ n, done }));
    },
  };
}

Deno.test("the ticker calls every registered stream each period, and stops when none is left", async () => {
  let clock = 0;
  const t = new StreamTicker(5, () => ++clock);
  const a = recorder();
  const b = recorder();
  const offA = t.add(a.tick);
  const offB = t.add(b.tick);
  await a.calls(2);
  // Each period ticks every registered stream, in one run, with one reading of the clock.
  assert.deepEqual(b.seen, a.seen);
  offA();
  const seenA = a.seen.length;
  await b.calls(seenA + 2);
  offB();
  assert.equal(a.seen.length, seenA, "no tick after removal");
  assert.deepEqual(b.seen.slice(0, seenA), a.seen);
  assert.equal(t.size, 0);
  // Removing twice is harmless; the timer is gone (the test sanitizer checks it).
  offB();
});

Deno.test("a tick that throws is reported and does not starve the others", async () => {
  const errors: unknown[] = [];
  const t = new StreamTicker(5, () => 0, (e) => errors.push(e));
  const good = recorder();
  const offBad = t.add(() => {
    throw new Error("boom");
  });
  const offGood = t.add(good.tick);
  await good.calls(2);
  offBad();
  offGood();
  // The bad tick runs first (registration order) and throws in each of those periods.
  assert.equal(errors.length, good.seen.length);
  assert.match(String(errors[0]), /boom/);
});

Deno.test("tick period: a tenth of the shorter deadline, within 5 ms .. 1 s", () => {
  assert.equal(tickPeriodMs(120_000, 15_000), 1_000);
  assert.equal(tickPeriodMs(300, 15_000), 30);
  assert.equal(tickPeriodMs(120_000, 60), 6);
  assert.equal(tickPeriodMs(20, 20), 5);
  assert.throws(() => new StreamTicker(0, () => 0), RangeError);
  assert.throws(() => new StreamTicker(1.5, () => 0), RangeError);
});
