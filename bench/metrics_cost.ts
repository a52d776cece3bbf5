/**
 * What Prometheus metrics cost: pairs of gateways on the same mock upstream,
 * one recording metrics (and scraped once a second, as Prometheus would) and
 * one started with `GATEWAY_METRICS=off`, measured in alternation with the
 * closed loop of `task bench`, two rounds per fresh pair. The row reports both throughputs and the
 * difference; the target is under 2%. `task bench` adds the row (one small
 * hook in bench/main.ts); alone, for a quick check:
 *
 *   deno run -A bench/metrics_cost.ts [--rounds N] [--seconds S]
 */
import { closedLoop, type Target } from "./load.ts";
import { gatewayModel, startGateway } from "./gateway_setup.ts";
import { cpuMs, type EarlyStarts, startAll, takeOr } from "./processes.ts";
import { median } from "./stats.ts";
import { atMost, fmt, type Row } from "./report.ts";
import { type MeasureOptions, runStandalone } from "./standalone.ts";

const TOKEN = "bench-operator-token-" + "a1b2c3d4".repeat(4);
const CONCURRENCY = 32;
const TARGET_PCT = 2;

/** Pair `pair`'s gateways (the same operator token on both, so metrics are the only difference). */
const starter = (o: MeasureOptions, pair: number) => async (which: "on" | "off") => {
  const dir = `${o.dir}/pair-${pair}/${which}`;
  await Deno.mkdir(dir, { recursive: true });
  return startGateway(dir, o.mockUrl, o.serverCpu, [], undefined, {
    GATEWAY_ADMIN_TOKEN: TOKEN,
    ...(which === "off" ? { GATEWAY_METRICS: "off" } : {}),
  });
};

/** `--quick`: the first pair started ahead (bench/processes.ts EarlyStarts). */
export function metricsEarly(o: MeasureOptions, early: EarlyStarts): void {
  const start = starter(o, 0);
  for (const which of ["on", "off"] as const) early.start(`metrics/0/${which}`, () => start(which));
}

export async function metricsCostRow(o: MeasureOptions): Promise<Row> {
  const rps = { on: [] as number[], off: [] as number[] };
  // The gateway process's CPU per answered request: holds better than rps on a busy machine.
  const cpuUs = { on: [] as number[], off: [] as number[] };
  let scrapes = 0;
  // Two processes of the same build differ by a few percent by themselves (an
  // A/A run of this row gave −2.2%, every round on one side), so the rounds
  // are spread over fresh pairs of gateways, two rounds per pair.
  const pairs = Math.max(1, Math.ceil(o.rounds / 2));
  for (let pair = 0; pair < pairs; pair++) {
    // Started in alternating order.
    const recipe = starter(o, pair);
    const start = (which: "on" | "off") =>
      takeOr(o.early, `metrics/${pair}/${which}`, () => recipe(which));
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
    let scraping = true;
    const scraper = (async () => {
      while (scraping) {
        const r = await fetch(`${on.url}/admin/v1/metrics`, {
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        if (r.status !== 200) throw new Error(`metrics scrape answered ${r.status}`);
        await r.text();
        scrapes++;
        await new Promise((r) => setTimeout(r, 1000));
      }
    })();
    try {
      // One unrecorded warm-up each, then alternate which goes first.
      const warm = o.warmSeconds ?? 1;
      await closedLoop(target(on), { concurrency: CONCURRENCY, seconds: warm });
      await closedLoop(target(off), { concurrency: CONCURRENCY, seconds: warm });
      for (let r = 0; r < 2 && rps.on.length < o.rounds; r++) {
        const order = r % 2 === 0 ? ["on", "off"] as const : ["off", "on"] as const;
        for (const which of order) {
          const g = which === "on" ? on : off;
          const cpu0 = cpuMs(g.pid);
          const res = await closedLoop(target(g), {
            concurrency: CONCURRENCY,
            seconds: o.seconds,
          });
          rps[which].push(res.ok / res.seconds);
          cpuUs[which].push(((cpuMs(g.pid) - cpu0) * 1000) / Math.max(1, res.ok));
        }
        o.log(
          `metrics pair ${pair + 1} round ${r + 1}: on ${fmt(rps.on.at(-1)!, 0)} rps, off ${
            fmt(rps.off.at(-1)!, 0)
          } rps; gateway CPU on ${fmt(cpuUs.on.at(-1)!, 1)} µs/req, off ${
            fmt(cpuUs.off.at(-1)!, 1)
          } µs/req`,
        );
      }
    } finally {
      scraping = false;
      await scraper.catch((e) => o.log(`scraper: ${e}`));
      await on.stop();
      await off.stop();
    }
  }
  const a = median(rps.on);
  const b = median(rps.off);
  // The verdict is the median of each round's paired difference: the two
  // measurements of a round are seconds apart, so the machine's drift over
  // the run cancels (a ratio of whole-run medians does not cancel it).
  const paired = rps.on.map((x, i) => ((rps.off[i] - x) / rps.off[i]) * 100);
  const cost = median(paired);
  const sorted = [...paired].sort((x, y) => x - y);
  const cOn = median(cpuUs.on);
  const cOff = median(cpuUs.off);
  const cpuPaired = median(cpuUs.on.map((x, i) => ((x - cpuUs.off[i]) / cpuUs.off[i]) * 100));
  return {
    metric: `Throughput cost of metrics (closed loop, ${CONCURRENCY} conn., scraped 1/s, ` +
      `${rps.on.length} paired rounds of ${o.seconds} s on ${pairs} fresh pairs of gateways; ` +
      `median paired difference, rounds ranged ` +
      `${fmt(sorted[0], 2)} to ${fmt(sorted.at(-1)!, 2)} %; ${fmt(a, 0)} rps with vs ${
        fmt(b, 0)
      } ` +
      `without; gateway CPU ${fmt(cOn, 1)} vs ${fmt(cOff, 1)} µs/req, paired ${
        fmt(cpuPaired, 2)
      } %; ` +
      `${scrapes} scrapes)`,
    gateway: `${fmt(cost, 2)} %`,
    target: `< ${TARGET_PCT} %`,
    verdict: atMost(cost, TARGET_PCT, "%"),
  };
}

if (import.meta.main) {
  await runStandalone("metrics", { rounds: 4, seconds: 2 }, async (o) => [await metricsCostRow(o)]);
}
