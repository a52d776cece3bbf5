import assert from "node:assert/strict";
import { type MonitorDeps, runMonitor } from "./monitor.ts";

class Stop extends Error {}

/** Deps whose gateway never answers; `sleep` ends the run after `rounds` waits. */
function deps(rounds: number) {
  const printed: string[] = [];
  const slept: number[] = [];
  const written: { path: string; secret: boolean }[] = [];
  const d: MonitorDeps = {
    fetch: () => Promise.reject(new TypeError("error sending request: connection refused")),
    readTextFile: () => Promise.resolve(null),
    writeTextFile: (path, _text, o) => {
      written.push({ path, secret: o?.secret === true });
      return Promise.resolve();
    },
    print: (l) => printed.push(l),
    randomBytes: (n) => new Uint8Array(n).fill(1),
    now: () => 0,
    sleep: (ms) => {
      slept.push(ms);
      return slept.length >= rounds ? Promise.reject(new Stop()) : Promise.resolve();
    },
    serve: () => ({ url: "http://127.0.0.1:1", finished: new Promise(() => {}) }),
  };
  return { d, printed, slept, written };
}

Deno.test("monitor --once: an unreachable gateway exits 1 with a WARN naming it, not a FAIL", async () => {
  const { d, printed } = deps(10);
  const code = await runMonitor(["--gateway", "http://127.0.0.1:9/", "--once"], d);
  assert.equal(code, 1);
  assert.deepEqual(printed, [
    "WARN http://127.0.0.1:9 unreachable (error sending request: connection refused): nothing verified",
  ]);
});

Deno.test("monitor following: an unreachable gateway is retried with back-off, never a FAIL", async () => {
  const { d, printed, slept } = deps(6);
  await assert.rejects(
    runMonitor(["--gateway", "http://127.0.0.1:9", "--interval", "10"], d),
    Stop,
  );
  // Doubling from the interval up to a minute.
  assert.deepEqual(slept, [10_000, 20_000, 40_000, 60_000, 60_000, 60_000]);
  assert.equal(printed.length, 6);
  assert.ok(printed.every((l) => l.startsWith("WARN http://127.0.0.1:9 unreachable")), printed[0]);
  assert.match(printed[0], /next try in 10 s/);
  assert.ok(!printed.some((l) => l.startsWith("FAIL")));
});

Deno.test("monitor as a witness: its key file is created readable by its owner only", async () => {
  const { d, written } = deps(1);
  const run = runMonitor([
    "--gateway",
    "http://127.0.0.1:9",
    "--witness-listen",
    "127.0.0.1:0",
    "--witness-key",
    "w.key",
    "--witness-name",
    "witness.example/w1",
  ], d);
  await assert.rejects(run, Stop);
  assert.deepEqual(written, [{ path: "w.key", secret: true }]);
});
