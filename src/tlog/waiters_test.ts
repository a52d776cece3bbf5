import assert from "node:assert/strict";
import type { After } from "../http/deadlines.ts";
import { createLogWaiters, type WaitEnd } from "./waiters.ts";

/** Deadlines fired by hand: a test decides when time has passed. */
function manualTimers() {
  const armed = new Set<{ ms: number; fire: () => void }>();
  const after: After = (ms, fire) => {
    const t = { ms, fire };
    armed.add(t);
    return { cancel: () => void armed.delete(t) };
  };
  /** Fires every deadline of exactly `ms` armed now. */
  const fire = (ms: number) => {
    for (const t of [...armed]) {
      if (t.ms !== ms) continue;
      armed.delete(t);
      t.fire();
    }
  };
  return { after, armed, fire };
}

const settled = async <T>(p: Promise<T>): Promise<T | "pending"> => {
  // Past a few turns of the microtask queue: anything resolved by now has settled.
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return await Promise.race([p, Promise.resolve("pending" as const)]);
};

Deno.test("log waiters: a local append wakes every waiter at once, nothing stays armed", async () => {
  const t = manualTimers();
  let probes = 0;
  const w = createLogWaiters({
    after: t.after,
    probe: () => Promise.resolve(String(++probes)),
    pollMs: 50,
    max: 10,
  });
  const since = w.tick;
  const a = w.wait(since, 1000);
  const b = w.wait(since, 1000);
  assert.equal(w.size, 2);
  assert.equal(await settled(a), "pending");
  w.notify("7");
  assert.equal(await a, "changed");
  assert.equal(await b, "changed");
  assert.equal(w.size, 0);
  assert.equal(probes, 0);
  // Deadlines cancelled; the shared re-read, armed for the waiters, finds none and ends.
  t.fire(50);
  assert.equal(probes, 0);
  assert.equal(t.armed.size, 0);
  // A wait begun after the log moved past `since` ends at once: no lost wake-up.
  assert.equal(await w.wait(since, 1000), "changed");
});

Deno.test("log waiters: one shared head re-read per interval sees appends made elsewhere", async () => {
  const t = manualTimers();
  let head = "3";
  let probes = 0;
  const w = createLogWaiters({
    after: t.after,
    probe: () => {
      probes++;
      return Promise.resolve(head);
    },
    pollMs: 50,
    max: 100,
  });
  const since = w.tick;
  const waits = Array.from({ length: 20 }, () => w.wait(since, 5000));
  // The first re-read knows no earlier value: it wakes everybody once (a spurious wake costs
  // one attempt; a missed one would cost the whole wait).
  t.fire(50);
  assert.deepEqual(new Set(await Promise.all(waits)), new Set(["changed"]));
  assert.equal(probes, 1);
  const again = Array.from({ length: 20 }, () => w.wait(w.tick, 5000));
  t.fire(50);
  await settled(again[0]);
  assert.equal(probes, 2, "one read for twenty waiters");
  assert.equal(await settled(again[0]), "pending", "the head did not move");
  head = "4"; // another replica appended
  t.fire(50);
  assert.deepEqual(new Set(await Promise.all(again)), new Set(["changed"]));
  assert.equal(probes, 3);
});

Deno.test("log waiters: deadline, abort, cap and close each end a wait and leave nothing", async () => {
  const t = manualTimers();
  const w = createLogWaiters({
    after: t.after,
    probe: () => Promise.resolve("0"),
    pollMs: 50,
    max: 2,
  });
  const timed = w.wait(w.tick, 300);
  const gone = new AbortController();
  const aborted = w.wait(w.tick, 300, gone.signal);
  assert.equal(await w.wait(w.tick, 300), "full", "past the cap: refused at once");
  gone.abort();
  assert.equal(await aborted, "aborted");
  t.fire(300);
  assert.equal(await timed, "timeout");
  assert.equal(w.size, 0);
  const already = new AbortController();
  already.abort();
  assert.equal(await w.wait(w.tick, 300, already.signal), "aborted");
  const stopping = w.wait(w.tick, 300);
  w.close();
  assert.equal(await stopping, "closed");
  assert.equal(await w.wait(w.tick, 300), "closed");
  assert.equal(t.armed.size, 0, "no deadline or re-read left armed");
});

Deno.test("log waiters: a failing re-read is reported and retried, the waiter still times out", async () => {
  const t = manualTimers();
  const errors: unknown[] = [];
  const w = createLogWaiters({
    after: t.after,
    probe: () => Promise.reject(new Error("kv down")),
    pollMs: 50,
    max: 2,
    onError: (e) => errors.push(e),
  });
  const p: Promise<WaitEnd> = w.wait(w.tick, 120);
  t.fire(50);
  await settled(p);
  t.fire(50);
  await settled(p);
  assert.equal(errors.length, 2);
  t.fire(120);
  assert.equal(await p, "timeout");
  t.fire(50);
  assert.equal(t.armed.size, 0);
});
