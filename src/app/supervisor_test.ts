import assert from "node:assert/strict";
import {
  hostWorker,
  parseWorkerSpec,
  supervise,
  type SupervisorIo,
  workerCount,
  type WorkerProcess,
  type WorkerSpec,
} from "./supervisor.ts";

/** A worker whose readiness and exit the test decides. */
function fakeWorker(pid: number) {
  let ready!: () => void;
  let exit!: (code: number) => void;
  const signals: string[] = [];
  const w: WorkerProcess = {
    pid,
    ready: new Promise<void>((r) => ready = r),
    exited: new Promise<number>((r) => exit = r),
    kill: (s) => {
      signals.push(s);
      if (s === "SIGTERM") exit(0);
    },
  };
  return { w, ready: () => ready(), exit: (c: number) => exit(c), signals };
}

function harness() {
  const spawned: { spec: WorkerSpec; f: ReturnType<typeof fakeWorker> }[] = [];
  const handlers = new Map<string, () => void>();
  const printed: string[] = [];
  const exits: number[] = [];
  let t = 0;
  const io: SupervisorIo = {
    spawn: (spec) => {
      const f = fakeWorker(100 + spawned.length);
      spawned.push({ spec, f });
      return f.w;
    },
    onSignal: (s, f) => void handlers.set(s, f),
    delay: () => Promise.resolve(),
    now: () => t,
    print: (l) => void printed.push(l),
    exit: (c) => void exits.push(c),
  };
  return { io, spawned, handlers, printed, exits, advance: (ms: number) => t += ms };
}

const spec = (index: number): WorkerSpec => ({
  host: "abcd",
  index,
  count: 2,
  ports: { base: 8080 },
  e2eeSeed: "11".repeat(32),
  cacheSalt: "22".repeat(32),
});
const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("supervisor: starts N, restarts a dead ready worker, SIGTERM drains all then exits 0", async () => {
  const h = harness();
  const sup = supervise(2, spec, h.io);
  assert.deepEqual(h.spawned.map((s) => s.spec.index), [0, 1]);
  h.spawned.forEach((s) => s.f.ready());
  await sup.ready;
  assert.ok(h.printed.includes("2 workers serving"));
  h.advance(60_000);
  h.spawned[1].f.exit(137); // a SIGKILLed worker
  await tick();
  await tick();
  assert.equal(h.spawned.length, 3);
  assert.equal(h.spawned[2].spec.index, 1, "the same slot is refilled");
  assert.equal(sup.restarts(), 1);
  h.spawned[2].f.ready();
  h.handlers.get("SIGHUP")!();
  assert.deepEqual(h.spawned[0].f.signals, ["SIGHUP"]);
  h.handlers.get("SIGTERM")!();
  await tick();
  assert.deepEqual(h.spawned[0].f.signals, ["SIGHUP", "SIGTERM"]);
  assert.deepEqual(h.spawned[2].f.signals, ["SIGHUP", "SIGTERM"]);
  assert.deepEqual(h.exits, [0]);
  assert.equal(h.spawned.length, 3, "nothing restarts while draining");
});

Deno.test("supervisor: a worker failing before it served stops the host with its code", async () => {
  const h = harness();
  supervise(2, spec, h.io);
  h.spawned[0].f.exit(2);
  await tick();
  await tick();
  assert.deepEqual(h.spawned[1].f.signals, ["SIGTERM"]);
  assert.deepEqual(h.exits, [2]);
  assert.equal(h.spawned.length, 2, "no restart loop on a bad configuration");
});

Deno.test("workerCount: auto is the core count; one outside Linux", () => {
  assert.deepEqual(workerCount("auto", 8, "linux"), { count: 8 });
  assert.deepEqual(workerCount(3, 8, "linux"), { count: 3 });
  assert.equal(workerCount("auto", 8, "darwin").count, 1);
  assert.ok(workerCount("auto", 8, "darwin").note);
  assert.deepEqual(workerCount("auto", 1, "darwin"), { count: 1 });
});

Deno.test("parseWorkerSpec: the supervisor's line round-trips; anything else is refused", () => {
  const ok = spec(1);
  assert.deepEqual(parseWorkerSpec(JSON.stringify(ok)), ok);
  assert.equal(hostWorker(ok).e2eeSeed.length, 32);
  for (
    const bad of [
      "not json",
      "null",
      JSON.stringify({ ...ok, index: 2 }),
      JSON.stringify({ ...ok, host: "../x" }),
      JSON.stringify({ ...ok, ports: { base: 0 } }),
      JSON.stringify({ ...ok, e2eeSeed: "11" }),
    ]
  ) assert.equal(parseWorkerSpec(bad), null, bad);
});
