import assert from "node:assert/strict";
import { StreamTicker, tickPeriodMs } from "./stream_ticker.ts";
import { sleep } from "../store/transient.ts";

Deno.test("the ticker calls every registered stream each period, and stops when none is left", async () => {
  let clock = 0;
  const t = new StreamTicker(5, () => ++clock);
  const a: number[] = [];
  const b: number[] = [];
  const offA = t.add((now) => a.push(now));
  const offB = t.add((now) => b.push(now));
  await sleep(40);
  offA();
  const seenA = a.length;
  await sleep(30);
  offB();
  assert.ok(seenA >= 2, `a ticked ${seenA} times`);
  assert.equal(a.length, seenA, "no tick after removal");
  assert.ok(b.length > seenA, "b kept ticking");
  assert.equal(t.size, 0);
  // Removing twice is harmless; the timer is gone (the test sanitizer checks it).
  offB();
});

Deno.test("a tick that throws is reported and does not starve the others", async () => {
  const errors: unknown[] = [];
  const t = new StreamTicker(5, () => 0, (e) => errors.push(e));
  let good = 0;
  const offBad = t.add(() => {
    throw new Error("boom");
  });
  const offGood = t.add(() => good++);
  await sleep(30);
  offBad();
  offGood();
  assert.ok(good >= 2);
  assert.ok(errors.length >= 2);
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
