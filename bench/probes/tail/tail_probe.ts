/**
 * What sets the gateway's added p99 at 500 req/s: the bench's open loop
 * against the gateway (pinned as in `task bench`, V8's `--trace-gc` on) and
 * against the mock directly, and the GC pauses the gateway logged during
 * the gateway's load, by kind: count, p50, p99, max and total pause time.
 * Pauses are counts and durations on the gateway's own thread, so they mean
 * something on a loaded machine where the latency percentiles do not.
 *
 * `deno run -A bench/probes/tail/tail_probe.ts [seconds] [rounds] [extra V8 flag,…]` (e.g. to try
 * `--max-semi-space-size=16`, which then overrides the gateway's own value).
 */
import { GATEWAY_V8_FLAGS } from "../../../enclave/build_args.ts";
import { gatewayModel, startGateway } from "../../gateway_setup.ts";
import { closedLoop, openLoop, type Target } from "../../load.ts";
import { spawnPinned } from "../../processes.ts";
import { percentile } from "../../stats.ts";

const RATE = 500;
const SERVER_CPU = 0;
const LOAD_CPU = 1;

interface Pause {
  kind: string;
  ms: number;
}

/** `[pid:isolate]  1234 ms: Scavenge 3.2 (4.2) -> 2.9 (5.0) MB, pooled: 0.0 MB, 1.82 / 0.00 ms …` */
const GC_LINE =
  /^\[\d+:0x[0-9a-f]+\]\s+\d+ ms: ([A-Za-z-]+(?: \([a-z]+\))?) .*? MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \/ ([\d.]+) ms/;

export function parseGcLines(text: string): Pause[] {
  const out: Pause[] = [];
  for (const line of text.split("\n")) {
    const m = line.match(GC_LINE);
    if (m) out.push({ kind: m[1], ms: Number(m[2]) });
  }
  return out;
}

function summary(xs: number[]): string {
  if (xs.length === 0) return "none";
  const f = (x: number) => x.toFixed(2);
  return `${xs.length}: p50 ${f(percentile(xs, 50))}, p99 ${f(percentile(xs, 99))}, max ${
    f(Math.max(...xs))
  } ms, total ${f(xs.reduce((a, b) => a + b, 0))} ms`;
}

if (import.meta.main) {
  const seconds = Number(Deno.args[0] ?? 8);
  const rounds = Number(Deno.args[1] ?? 2);
  const extra = Deno.args[2] ? Deno.args[2].split(",") : [];
  const dir = await Deno.makeTempDir({ prefix: "tail_probe_" });
  const mock = await spawnPinned(
    LOAD_CPU,
    ["run", "-A", "bench/mock_upstream.ts"],
    /mock listening on (\S+)/,
  );
  const out = `${dir}/gateway.out`;
  const gw = await startGateway(
    dir,
    mock.url,
    SERVER_CPU,
    [`--v8-flags=${[...GATEWAY_V8_FLAGS, ...extra, "--trace-gc"].join(",")}`],
    undefined,
    {},
    out,
  );
  try {
    const t: Target = {
      base: gw.url,
      headers: { authorization: `Bearer ${gw.key}` },
      model: gatewayModel,
    };
    const direct: Target = { base: mock.url, headers: {}, model: (m) => m };
    // Warm-up as in the bench: a closed loop, then the open loop itself.
    await closedLoop(t, { concurrency: 32, seconds: 3 });
    await openLoop(t, { rate: RATE, seconds: 2 });
    for (let r = 1; r <= rounds; r++) {
      const d = await openLoop(direct, { rate: RATE, seconds });
      const before = (await Deno.readTextFile(out)).length;
      const g = await openLoop(t, { rate: RATE, seconds });
      const gcText = (await Deno.readTextFile(out)).slice(before);
      const pauses = parseGcLines(gcText);
      if (Deno.env.get("TAIL_PROBE_RAW")) {
        console.log(
          gcText.split("\n").filter((l) => l.startsWith("[") && !l.includes("Scavenge")).join("\n"),
        );
      }
      const f = (x: number) => x.toFixed(3);
      const added = (p: number) => percentile(g.latencies, p) - percentile(d.latencies, p);
      console.log(
        `round ${r}: ${g.ok} ok, ${g.errors} errors; added p50 ${f(added(50))} p99 ${
          f(added(99))
        } ` +
          `p99.9 ${f(added(99.9))} ms; gateway max ${f(Math.max(...g.latencies))} ms; ` +
          `> 5 ms: ${g.latencies.filter((x) => x > 5).length}`,
      );
      const kinds = [...new Set(pauses.map((p) => p.kind))];
      for (const k of kinds) {
        console.log(`  GC ${k}: ${summary(pauses.filter((p) => p.kind === k).map((p) => p.ms))}`);
      }
      if (kinds.length === 0) console.log("  GC: no pauses logged");
      // Incremental marking also runs in steps on the main thread between pauses.
      const steps = [...gcText.matchAll(/biggest step ([\d.]+) ms/g)].map((m) => Number(m[1]));
      if (steps.length > 0) {
        console.log(`  longest incremental marking step: ${Math.max(...steps)} ms`);
      }
    }
  } finally {
    await gw.stop();
    await mock.stop();
    await Deno.remove(dir, { recursive: true });
  }
}
