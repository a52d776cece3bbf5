/**
 * What the transparency log costs, in the same run: pairs of gateways on the
 * same mock upstream, one logging every receipt (the default) and one started
 * with `GATEWAY_TLOG=off`, each under its own `task bench` closed loop, both
 * loops running at once: over the same seconds the machine's speed (which
 * drifts by a third within a minute on this VM, and drowned a few percent
 * when the two were measured one after the other) is the same for both. The
 * row reports the gateway process's CPU per answered request with and without
 * (target: the log adds at most 5%). Then, in a phase of its own
 * (its polls would otherwise count as log CPU), with the logging gateway
 * under the same load, a sampler measures the delay from a response's
 * release (its last byte at the client) to its inclusion in a signed
 * checkpoint (the inclusion endpoint answering 200), p50 and p99. `task bench` adds the rows;
 * alone, for a quick check:
 *
 *   deno run -A bench/tlog_cost.ts [--rounds N] [--seconds S]
 */
import { closedLoop, type Target } from "./load.ts";
import { gatewayModel, startGateway } from "./gateway_setup.ts";
import { cpuMs, type EarlyStarts, startAll, takeOr, threadCpuMs } from "./processes.ts";
import { median, percentile } from "./stats.ts";
import { atMost, fmt, type Row } from "./report.ts";
import { type MeasureOptions, runStandalone } from "./standalone.ts";

const CONCURRENCY = 32;
const TARGET_PCT = 5;
/** The inclusion bound stated in docs/decisions/transparency-log-cadence.md. */
const BOUND_MS = 2_000;

/** Requests one at a time beside the load; each polled until it is in a signed checkpoint. */
async function sampleInclusion(
  base: string,
  key: string,
  until: () => boolean,
  delays: number[],
): Promise<void> {
  while (!until()) {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: gatewayModel("chat"),
        messages: [{ role: "user", content: "how long until I am logged?" }],
      }),
    });
    await res.arrayBuffer();
    const released = performance.now();
    const id = res.headers.get("x-receipt-id");
    if (res.status !== 200 || id === null) continue;
    for (;;) {
      const r = await fetch(`${base}/v1/aci/receipts/${id}/inclusion`, {
        headers: { authorization: `Bearer ${key}` },
      });
      await r.arrayBuffer();
      if (r.status === 200) break;
      if (performance.now() - released > 30_000) throw new Error(`receipt ${id} never logged`);
      await new Promise((r) => setTimeout(r, 2));
    }
    delays.push(performance.now() - released);
  }
}

/** The 1-minute load average now (the machine is shared: say how busy it was). */
const loadAvg = () => Deno.readTextFileSync("/proc/loadavg").split(" ")[0];

/** Pair `pair`'s gateways: logging every receipt, and not. */
const starter = (o: MeasureOptions, pair: number) => async (which: "on" | "off") => {
  const dir = `${o.dir}/pair-${pair}/${which}`;
  await Deno.mkdir(dir, { recursive: true });
  return startGateway(
    dir,
    o.mockUrl,
    o.serverCpu,
    [],
    undefined,
    which === "off" ? { GATEWAY_TLOG: "off" } : {},
  );
};

/** `--quick`: the first pair started ahead (bench/processes.ts EarlyStarts). */
export function tlogEarly(o: MeasureOptions, early: EarlyStarts): void {
  const start = starter(o, 0);
  for (const which of ["on", "off"] as const) early.start(`tlog/0/${which}`, () => start(which));
}

export async function tlogCostRows(o: MeasureOptions): Promise<Row[]> {
  const load0 = loadAvg();
  const cpuUs = { on: [] as number[], off: [] as number[] };
  const rps = { on: [] as number[], off: [] as number[] };
  const delays: number[] = [];
  const split = { on: "", off: "" };
  const pairs = Math.max(1, Math.ceil(o.rounds / 2));
  for (let pair = 0; pair < pairs; pair++) {
    const recipe = starter(o, pair);
    const start = (which: "on" | "off") =>
      takeOr(o.early, `tlog/${pair}/${which}`, () => recipe(which));
    const [first, second] = await startAll(o.concurrentStarts ?? false, [
      () => start(pair % 2 === 0 ? "on" : "off"),
      () => start(pair % 2 === 0 ? "off" : "on"),
    ]);
    const [on, off] = pair % 2 === 0 ? [first, second] : [second, first];
    const target = (g: typeof on): Target => ({
      base: g.url,
      headers: { authorization: `Bearer ${g.key}` },
      model: gatewayModel,
    });
    try {
      const both = { on, off };
      const sides = ["on", "off"] as const;
      // Both loaded at once for `seconds`; each gateway's CPU over that same window.
      const atOnce = (seconds: number) =>
        Promise.all(
          sides.map(async (which) => {
            const g = both[which];
            const cpu0 = cpuMs(g.pid);
            const threads0 = threadCpuMs(g.pid);
            const res = await closedLoop(target(g), { concurrency: CONCURRENCY, seconds });
            // Read as this side's loop ends, not once both have.
            const cpu = cpuMs(g.pid) - cpu0;
            const threads = [...threadCpuMs(g.pid)].map(([k, v]) =>
              [k, v - (threads0.get(k) ?? 0)] as const
            );
            return { which, res, cpu, threads };
          }),
        );
      // Warm both (JIT, KV pages) before anything is recorded.
      await atOnce(o.warmSeconds ?? 2);
      for (let r = 0; r < 2 && cpuUs.on.length < o.rounds; r++) {
        for (const { which, res, cpu, threads } of await atOnce(o.seconds)) {
          rps[which].push(res.ok / res.seconds);
          cpuUs[which].push((cpu * 1000) / Math.max(1, res.ok));
          split[which] = threads
            .map(([k, v]) => [k, (v * 1000) / Math.max(1, res.ok)] as const)
            .filter(([, v]) => v >= 1)
            .map(([k, v]) => `${k.trim()} ${fmt(v, 0)}`)
            .join(", ");
        }
        // By thread (JS, V8's GC helpers, KV's SQLite writer "sw"): where a difference lies.
        o.log(
          `tlog pair ${pair + 1} round ${r + 1}: gateway CPU with log ${
            fmt(cpuUs.on.at(-1)!, 1)
          } µs/req (${split.on}), without ${fmt(cpuUs.off.at(-1)!, 1)} µs/req (${split.off})`,
        );
      }
      // The inclusion delay under the same load, in a phase of its own: the sampler's polls
      // are requests the closed loop does not count, so they must not be in a CPU round.
      let done = false;
      const sampler = sampleInclusion(on.url, on.key, () => done, delays);
      await closedLoop(target(on), { concurrency: CONCURRENCY, seconds: o.seconds });
      done = true;
      await sampler;
      o.log(`tlog pair ${pair + 1}: ${delays.length} inclusion samples`);
    } finally {
      await on.stop();
      await off.stop();
    }
  }
  // Paired per round: the two measurements share their seconds, so drift cancels.
  const paired = cpuUs.on.map((x, i) => ((x - cpuUs.off[i]) / cpuUs.off[i]) * 100);
  const cost = median(paired);
  const sorted = [...paired].sort((a, b) => a - b);
  const p50 = percentile(delays, 50);
  const p99 = percentile(delays, 99);
  return [
    {
      metric: `CPU cost of the transparency log (closed loops of ${CONCURRENCY} conn. on ` +
        `both gateways at once, ${cpuUs.on.length} paired rounds of ${o.seconds} s on ${pairs} ` +
        `fresh pairs; gateway CPU ` +
        `${fmt(median(cpuUs.on), 1)} µs/req with vs ${fmt(median(cpuUs.off), 1)} without, ` +
        `rounds ${fmt(sorted[0], 2)} to ${fmt(sorted.at(-1)!, 2)} %; ${
          fmt(median(rps.on), 0)
        } vs ` +
        `${fmt(median(rps.off), 0)} rps; load average ${load0} → ${loadAvg()})`,
      gateway: `${fmt(cost, 2)} %`,
      target: `≤ ${TARGET_PCT} %`,
      verdict: atMost(cost, TARGET_PCT, "%"),
    },
    {
      metric: `Release → inclusion in a signed checkpoint, under that load (${delays.length} ` +
        "samples; p50 / p99)",
      gateway: `${fmt(p50, 1)} / ${fmt(p99, 1)} ms`,
      target: `≤ ${BOUND_MS} ms`,
      verdict: atMost(p99, BOUND_MS, "ms"),
    },
  ];
}

if (import.meta.main) {
  await runStandalone("tlog", { rounds: 2, seconds: 2 }, (o) => tlogCostRows(o));
}
