/**
 * What holds the slowest requests at 500 req/s, episode by episode: the
 * bench's open loop against the gateway (pinned as in `task bench`, with
 * `lag_preload.ts` and V8's `--trace-gc`), the slow requests (> 5 ms) grouped
 * into episodes by send time, and for each of the worst episodes what the
 * gateway's timeline shows meanwhile: event-loop lags, KV commits that were
 * large or slow, GC pauses, and the requests' Server-Timing phases.
 *
 * `deno run -A bench/probes/tail/tail_timeline.ts [seconds] [episodes]`
 */
import { GATEWAY_V8_FLAGS } from "../../../enclave/build_args.ts";
import { closedLoop, openLoop } from "../../load.ts";
import { percentile } from "../../stats.ts";
import { startProbedGateway } from "./probed_gateway.ts";

const GC_LINE =
  /^\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: ([A-Za-z-]+(?: \([a-z]+\))?) .*? ([\d.]+) \/ ([\d.]+) ms/;

const f = (x: number) => x.toFixed(1);

if (import.meta.main) {
  const seconds = Number(Deno.args[0] ?? 8);
  const show = Number(Deno.args[1] ?? 6);
  const p = await startProbedGateway({
    prefix: "tail_timeline_",
    denoFlags: [`--v8-flags=${[...GATEWAY_V8_FLAGS, "--trace-gc"].join(",")}`],
    stdoutTo: (dir) => `${dir}/gateway.out`,
  });
  const out = p.out!;
  try {
    const t = p.target;
    await closedLoop(t, { concurrency: 32, seconds: 3 });
    await openLoop(t, { rate: 500, seconds: 2 });
    await p.timeline(); // drops the warm-up's records
    const before = (await Deno.readTextFile(out)).length;
    const g = await openLoop(t, { rate: 500, seconds, phases: true });
    const tl = await p.timeline();
    const gcs = (await Deno.readTextFile(out)).slice(before).split("\n").flatMap((l) => {
      const m = l.match(GC_LINE);
      return m ? [{ at: tl.origin + Number(m[1]), kind: m[2], ms: Number(m[3]) }] : [];
    });
    const reqs = g.latencies.map((ms, i) => ({
      at: g.sentAt![i],
      ms,
      timing: g.timingHeaders![i],
    }));
    console.log(
      `${reqs.length} requests: p50 ${f(percentile(g.latencies, 50))} p99 ${
        f(percentile(g.latencies, 99))
      } max ${f(Math.max(...g.latencies))} ms; > 5 ms: ${reqs.filter((r) => r.ms > 5).length}; ` +
        `lags > 2 ms: ${tl.lags.length} (sum ${f(tl.lags.reduce((a, l) => a + l[1], 0))} ms); ` +
        `commits ${tl.commits.length}; GC ${gcs.length}`,
    );
    // Episodes: slow requests whose sends are within 20 ms of the previous slow one.
    const slow = reqs.filter((r) => r.ms > 5).sort((a, b) => a.at - b.at);
    const episodes: (typeof slow)[] = [];
    for (const r of slow) {
      const e = episodes[episodes.length - 1];
      if (e && r.at - e[e.length - 1].at < 20) e.push(r);
      else episodes.push([r]);
    }
    console.log(`${episodes.length} episodes; sizes ${episodes.map((e) => e.length).join(",")}`);
    episodes.sort((a, b) => Math.max(...b.map((r) => r.ms)) - Math.max(...a.map((r) => r.ms)));
    const t0 = reqs[0].at;
    for (const e of episodes.slice(0, show)) {
      const from = e[0].at - 50;
      const to = Math.max(...e.map((r) => r.at + r.ms));
      const worst = e.reduce((a, b) => (b.ms > a.ms ? b : a));
      console.log(
        `\nepisode at +${f(e[0].at - t0)} ms: ${e.length} slow, worst ${f(worst.ms)} ms ` +
          `(${worst.timing}), span ${f(to - e[0].at)} ms`,
      );
      for (const [at, lag] of tl.lags) {
        if (at >= from && at <= to) console.log(`  lag  +${f(at - t0)} ${f(lag)} ms`);
      }
      for (const [at, n, sync, wall] of tl.commits) {
        if (at + wall >= from && at <= to && (wall > 3 || n > 40 || sync > 1)) {
          console.log(
            `  commit +${f(at - t0)}: ${n} mutations, sync ${f(sync)} ms, wall ${f(wall)} ms`,
          );
        }
      }
      for (const gc of gcs) {
        if (gc.at >= from - 20 && gc.at <= to) {
          console.log(`  gc   +${f(gc.at - t0)} ${gc.kind} ${gc.ms} ms`);
        }
      }
    }
    // Where slow requests fall: by time since the last large commit (the log's append,
    // > 40 mutations) and since the last GC pause began.
    const big = tl.commits.filter((c) => c[1] > 40);
    const bigAt = big.map((c) => c[0]).sort((a, b) => a - b);
    const gcAt = gcs.map((g) => g.at).sort((a, b) => a - b);
    const since = (xs: number[], at: number) => {
      let lo = -1;
      for (let i = 0; i < xs.length && xs[i] <= at; i++) lo = i;
      return lo < 0 ? Infinity : at - xs[lo];
    };
    for (const [name, xs] of [["large commit", bigAt], ["GC pause", gcAt]] as const) {
      const bins = [0, 5, 10, 20, 40, 80, 160, Infinity];
      const rows: string[] = [];
      for (let b = 0; b + 1 < bins.length; b++) {
        const inBin = reqs.filter((r) => {
          const d = since(xs, r.at);
          return d >= bins[b] && d < bins[b + 1];
        });
        const slowN = inBin.filter((r) => r.ms > 5).length;
        rows.push(`${bins[b]}–${bins[b + 1]} ms: ${slowN}/${inBin.length} slow`);
      }
      console.log(`since the last ${name}: ${rows.join("; ")}`);
    }
    console.log(
      `\nlarge commits (> 40 mutations): ${big.length}; wall p50 ${
        big.length ? f(percentile(big.map((c) => c[3]), 50)) : "-"
      } ms, sync max ${big.length ? f(Math.max(...big.map((c) => c[2]))) : "-"} ms; ` +
        `all commits wall p99 ${f(percentile(tl.commits.map((c) => c[3]), 99))} max ${
          f(Math.max(...tl.commits.map((c) => c[3])))
        } ms`,
    );
  } finally {
    await p.stop();
  }
}
