import assert from "node:assert/strict";
import { DeadlineWheel, timerAfter } from "./deadlines.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();

Deno.test("deadline wheel: fires no earlier than asked, at most about one slot late", async () => {
  const wheel = new DeadlineWheel(now, 10);
  const t0 = now();
  const fired = await new Promise<number>((r) => wheel.after(40, () => r(now() - t0)));
  assert.ok(fired >= 40, `fired after ${fired} ms`);
  assert.ok(fired < 40 + 10 + 40, `fired after ${fired} ms`); // one slot, plus scheduling slack
  assert.equal(wheel.size, 0);
});

Deno.test("deadline wheel: a cancelled deadline never fires, and nothing stays armed", async () => {
  const wheel = new DeadlineWheel(now, 10);
  let fired = 0;
  const d = wheel.after(20, () => fired++);
  const kept = wheel.after(30, () => fired += 10);
  d.cancel();
  d.cancel(); // idempotent
  assert.equal(wheel.size, 1);
  await sleep(60);
  assert.equal(fired, 10);
  kept.cancel(); // after firing: a no-op
  assert.equal(wheel.size, 0);
  // Armed and cancelled at once: the runtime timer is kept unreferenced (the test's
  // sanitizer would fail on a referenced timer left behind).
  for (let i = 0; i < 10_000; i++) wheel.after(60_000, () => fired++).cancel();
  assert.equal(wheel.size, 0);
});

Deno.test("deadline wheel: one deadline at a time keeps its runtime timer instead of making one each", async () => {
  // A lone request arms and cancels its deadlines one after another with nothing else armed.
  const real = globalThis.setTimeout;
  let made = 0;
  globalThis.setTimeout = ((f: () => void, ms?: number) => {
    made++;
    return real(f, ms);
  }) as typeof setTimeout;
  const wheel = new DeadlineWheel(now, 10);
  try {
    for (let i = 0; i < 1_000; i++) {
      wheel.after(60_000, () => {}).cancel();
      wheel.after(30_000, () => {}).cancel();
      wheel.after(45_000, () => {}).cancel();
    }
  } finally {
    globalThis.setTimeout = real;
  }
  assert.equal(wheel.size, 0);
  assert.ok(made <= 3, `${made} runtime timers for 3,000 deadlines`);
  // The kept timer (unreferenced: the sanitizer does not count it) still serves later
  // deadlines, earlier or later than it.
  let fired = "";
  wheel.after(20, () => fired += "a").cancel();
  wheel.after(40, () => fired += "b");
  wheel.after(10, () => fired += "c");
  await sleep(80);
  assert.equal(fired, "cb");
  wheel.after(60_000, () => fired += "x");
  wheel.close(); // shutdown: nothing fires afterwards, no timer left
  assert.equal(fired, "cb");
});

Deno.test("deadline wheel: deadlines fire in order of their time, whatever the order armed", async () => {
  const wheel = new DeadlineWheel(now, 5);
  const order: number[] = [];
  const done = new Promise<void>((r) => {
    for (const ms of [45, 5, 25, 65, 15]) {
      wheel.after(ms, () => {
        order.push(ms);
        if (order.length === 5) r();
      });
    }
  });
  await done;
  assert.deepEqual(order, [5, 15, 25, 45, 65]);
});

Deno.test("deadline wheel: a deadline armed from a firing one, and a throwing one, do not stop the rest", async () => {
  const wheel = new DeadlineWheel(now, 5);
  const errors: unknown[] = [];
  const onError = (e: ErrorEvent) => {
    e.preventDefault();
    errors.push(e.error);
  };
  globalThis.addEventListener("error", onError);
  try {
    const seen: string[] = [];
    await new Promise<void>((r) => {
      wheel.after(10, () => {
        throw new Error("boom");
      });
      wheel.after(10, () => {
        seen.push("first");
        wheel.after(10, () => {
          seen.push("second");
          r();
        });
      });
    });
    await sleep(0);
    assert.deepEqual(seen, ["first", "second"]);
    assert.equal(errors.length, 1);
    assert.equal((errors[0] as Error).message, "boom");
  } finally {
    globalThis.removeEventListener("error", onError);
  }
});

Deno.test("deadline wheel: a longer delay fires within ~1/64 of it, never early", async () => {
  const wheel = new DeadlineWheel(now, 1);
  const t0 = now();
  // 320 ms: slots of 8 ms (the first power of two × 1 ms with 64 slots ≥ 320 ms).
  const fired = await new Promise<number>((r) => wheel.after(320, () => r(now() - t0)));
  assert.ok(fired >= 320 && fired < 320 + 8 + 40, `fired after ${fired} ms`);
});

Deno.test("timerAfter: one runtime timer, cancellable", async () => {
  let fired = 0;
  timerAfter(5, () => fired++);
  timerAfter(5, () => fired += 10).cancel();
  await sleep(30);
  assert.equal(fired, 1);
});
