/**
 * CPU time of exactly the calls one request makes into src/operator/metrics.ts
 * (in-flight up and down, own-time observation, the request observation), per
 * request, plus the time of one scrape. Counts CPU, not wall time, so it holds
 * on a loaded machine:
 *
 *   deno run -A bench/probes/metrics_calls/metrics_calls.ts [--n 200000]
 */
import { createMetrics, type GatewayMetrics, noopMetrics } from "../../../src/operator/metrics.ts";
import process from "node:process";

const arg = (name: string, d: number) => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : d;
};
const N = arg("n", 200_000);
const MODELS = ["m-a", "m-b"];

function run(m: GatewayMetrics, n: number): number {
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    m.inFlight(1);
    m.own(0.3 + (i % 7) * 0.01);
    m.inFlight(-1);
    m.request({
      route: "/v1/chat/completions",
      status: i % 50 === 0 ? 429 : 200,
      model: MODELS[i & 1],
      provider: "mock",
      phases: { upstream: 1.2, commit: 0.4 },
      costNano: 1234n,
      refusal: i % 50 === 0 ? "rate_limited" : undefined,
    });
  }
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / n;
}

const on = createMetrics({
  now: () => performance.now(),
  confidential: ["p1"],
  verification: () => ({ verified: true, sessionId: "s" }),
  openStreams: () => 0,
});
on.connections("public", () => ({
  open: 3,
  headerTimeouts: 0,
  idleTimeouts: 0,
  evicted: 0,
  refused: 0,
  acceptErrors: 0,
}));
const off = noopMetrics();
for (let r = 0; r < 2; r++) {
  run(on, N / 4);
  run(off, N / 4);
} // warm-up
const onUs: number[] = [];
const offUs: number[] = [];
for (let r = 0; r < 5; r++) {
  onUs.push(run(on, N));
  offUs.push(run(off, N));
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1];
const s0 = process.cpuUsage();
const SCRAPES = 200;
let bytes = 0;
for (let i = 0; i < SCRAPES; i++) bytes += (await on.render()).length;
const s = process.cpuUsage(s0);
console.log(
  `metrics on: ${(med(onUs) * 1000).toFixed(0)} ns/request CPU; off: ${
    (med(offUs) * 1000).toFixed(0)
  } ns; ` +
    `scrape: ${((s.user + s.system) / SCRAPES).toFixed(0)} µs CPU (${
      Math.round(bytes / SCRAPES)
    } bytes)`,
);
