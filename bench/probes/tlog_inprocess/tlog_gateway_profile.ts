/**
 * Where the transparency log's cost shows in the gateway's main thread: two
 * gateways under `--cpu-prof` (one with `GATEWAY_TLOG=off`), each driven by
 * the bench's closed loop (32 connections) for the same time, one after the
 * other; prints each one's main-thread µs per request, its KV calls, commits,
 * mutations and commit sync time per request (bench/probes/lone/counters_preload.ts),
 * and the functions whose self time per request differs most between them.
 *
 *   deno run -A bench/probes/tlog_inprocess/tlog_gateway_profile.ts [--seconds 8]
 */
import { closedLoop, type Target } from "../../load.ts";
import { gatewayModel, startGateway } from "../../gateway_setup.ts";
import { pinSelf, ROOT, spawnPinned } from "../../processes.ts";
import { summarizeProfile } from "../../cpu_profile.ts";
import { numFlag } from "../../standalone.ts";

const PRELOAD = `--preload=${ROOT}bench/probes/lone/counters_preload.ts`;
await pinSelf(1);
const seconds = numFlag("seconds", 8);
const mock = await spawnPinned(
  1,
  ["run", "-A", "bench/mock_upstream.ts"],
  /mock listening on (\S+)/,
);

async function profile(tlog: boolean) {
  const dir = await Deno.makeTempDir({ prefix: "gateway-tlog-prof-" });
  const gw = await startGateway(
    dir,
    mock.url,
    0,
    ["--cpu-prof", `--cpu-prof-dir=${dir}`, PRELOAD],
    undefined,
    { PROBE_FILE: `${dir}/counts.jsonl`, ...(tlog ? {} : { GATEWAY_TLOG: "off" }) },
  );
  const snap = async () => {
    Deno.kill(gw.pid, "SIGUSR2");
    await new Promise((r) => setTimeout(r, 200));
    const lines = (await Deno.readTextFile(`${dir}/counts.jsonl`)).trim().split("\n");
    return JSON.parse(lines[lines.length - 1]).counts as Record<string, number>;
  };
  // The bench's own closed loop and request (the rows of bench/tlog_cost.ts).
  const target: Target = {
    base: gw.url,
    headers: { authorization: `Bearer ${gw.key}` },
    model: gatewayModel,
  };
  const run = async (s: number) => (await closedLoop(target, { concurrency: 32, seconds: s })).ok;
  await run(2);
  const c0 = await snap();
  const start = performance.now();
  const ok = await run(seconds);
  const stop = performance.now();
  const c1 = await snap();
  const counts = Object.fromEntries(
    Object.keys(c1).map((k) => [k, ((c1[k] - (c0[k] ?? 0)) / ok).toFixed(3)]),
  );
  await gw.stop();
  const exited = performance.now();
  const file = [...Deno.readDirSync(dir)].find((e) => e.name.endsWith(".cpuprofile"))!;
  const json: unknown = JSON.parse(await Deno.readTextFile(`${dir}/${file.name}`));
  const s = summarizeProfile(json, ROOT, {
    top: 400,
    window: { fromEndMs: exited - start, toEndMs: exited - stop },
  });
  await Deno.remove(dir, { recursive: true });
  const perReq = new Map(s.selfTop.map((x) => [x.name, (x.ms * 1000) / ok]));
  const inclusive = new Map(s.projectInclusiveTop.map((x) => [x.name, (x.ms * 1000) / ok]));
  return { ok, busy: (s.busyMs * 1000) / ok, perReq, inclusive, counts };
}

const on = await profile(true);
const off = await profile(false);
await mock.stop();
console.log(
  `main thread per request: with the log ${on.busy.toFixed(1)} µs (${on.ok} requests), without ${
    off.busy.toFixed(1)
  } µs (${off.ok})`,
);
console.log("per request, with the log:", on.counts);
console.log("per request, without:", off.counts);
const names = new Set([...on.perReq.keys(), ...off.perReq.keys()]);
const diffs = [...names].map((n) => ({
  n,
  d: (on.perReq.get(n) ?? 0) - (off.perReq.get(n) ?? 0),
  on: on.perReq.get(n) ?? 0,
}));
diffs.sort((a, b) => Math.abs(b.d) - Math.abs(a.d));
for (const x of diffs.slice(0, 30)) {
  console.log(`${x.d >= 0 ? "+" : ""}${x.d.toFixed(2)} µs/req (with ${x.on.toFixed(2)})  ${x.n}`);
}
// The log's own code, inclusive, in the logging gateway's profile alone: no drift between runs.
console.log("the log's functions, inclusive, with the log (µs/req):");
for (const [n, us] of on.inclusive) {
  if (/src\/tlog\/|pendingReceipt|mergeFrames|framed|sha256Parts|leafHash|receiptEntry/.test(n)) {
    console.log(`  ${us.toFixed(2)}  ${n}`);
  }
}
