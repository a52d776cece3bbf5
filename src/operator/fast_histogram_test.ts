import assert from "node:assert/strict";
import { Histogram, Registry } from "prom-client";
import { fastHistogram } from "./fast_histogram.ts";

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];

Deno.test("fastHistogram renders exactly what prom-client's Histogram renders", async () => {
  const theirs = new Registry();
  const ours = new Registry();
  const h = new Histogram({ name: "t_seconds", help: "h", buckets: BUCKETS, registers: [theirs] });
  const f = fastHistogram("t_seconds", "h", BUCKETS);
  ours.registerMetric(f.metric);
  // On a bound, between bounds, below the first and above the last.
  for (const v of [0, 0.001, 0.0011, 0.05, 1, 3, 10, 10.5, 1e6]) {
    h.observe(v);
    f.observe(v);
  }
  assert.equal(await ours.metrics(), await theirs.metrics());
  assert.match(await ours.metrics(), /t_seconds_bucket\{le="\+Inf"\} 9/);
});

Deno.test("fastHistogram ignores a non-finite value instead of throwing on the hot path", async () => {
  const r = new Registry();
  const f = fastHistogram("n_seconds", "h", BUCKETS);
  r.registerMetric(f.metric);
  f.observe(Number.NaN);
  f.observe(Infinity);
  f.observe(0.5);
  assert.match(await r.metrics(), /n_seconds_count 1\n/);
  r.resetMetrics();
  assert.match(await r.metrics(), /n_seconds_count 0\n/);
});
