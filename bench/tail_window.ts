/**
 * Issue #27's tail and moderate-load rows: the open loop at a fixed rate over
 * windows of at least 8 s (shorter ones miss GC and checkpoint stalls), on
 * the main run's direct, receipt-floor and gateway paths in alternation.
 * Reports the added p99 with its verdict, each server's share of its core
 * (the gateway's ≤ 2× the floor's), and what the slowest 1% of the gateway's
 * answers waited on, from its own `Server-Timing`: outside its handler (the
 * request queued behind a busy event loop: GC pauses, other requests'
 * work), its own work, the upstream, the durable commit.
 */
import { openLoop, type Target } from "./load.ts";
import { cpuMs } from "./processes.ts";
import { median, percentile } from "./stats.ts";
import { atMost, fmt, type Row } from "./report.ts";

export const TAIL_WINDOW_S = 8;

type TailPath = "direct" | "floor" | "gateway";

interface Phases {
  outside: number;
  own: number;
  upstream: number;
  commit: number;
}

function phasesOf(latency: number, header: string): Phases {
  const v: Record<string, number> = {};
  for (const part of header.split(",")) {
    const m = part.trim().match(/^([\w-]+);dur=([\d.]+)/);
    if (m) v[m[1]] = Number(m[2]);
  }
  const gw = v.gw ?? 0;
  const upstream = v.upstream ?? 0;
  const commit = v.commit ?? 0;
  return { outside: latency - gw, own: gw - upstream - commit, upstream, commit };
}

export async function tailRows(o: {
  targets: Record<TailPath, Target>;
  pids: Record<Exclude<TailPath, "direct">, number>;
  rate: number;
  rounds: number;
  seconds?: number;
  /**
   * Windows of the mock (the baseline subtracted) and of the floor (its p99 and core share are
   * the reference, not the verdict), shorter in `--quick` to stay within its minute; the
   * gateway's window is never shorter than 8 s.
   */
  referenceSeconds?: number;
  log: (msg: string) => void;
}): Promise<{ rows: Row[]; ok: number }> {
  const seconds = Math.max(o.seconds ?? TAIL_WINDOW_S, TAIL_WINDOW_S);
  const paths: TailPath[] = ["direct", "floor", "gateway"];
  const windowOf = (p: TailPath) => p === "gateway" ? seconds : (o.referenceSeconds ?? seconds);
  const p99 = new Map<TailPath, number[]>(paths.map((p) => [p, []]));
  const p50 = new Map<TailPath, number[]>(paths.map((p) => [p, []]));
  const share = new Map<TailPath, number[]>(paths.map((p) => [p, []]));
  /** Windows that took over 1.5× their length: the server fell behind the rate (backlog). */
  let behind = 0;
  const slow: Phases[] = [];
  const typical: Phases[] = [];
  let over5 = 0;
  let ok = 0;
  for (let r = 0; r < o.rounds; r++) {
    for (const p of r % 2 ? [...paths].reverse() : paths) {
      const pid = p === "direct" ? 0 : o.pids[p];
      const c0 = pid ? cpuMs(pid) : 0;
      const res = await openLoop(o.targets[p], {
        rate: o.rate,
        seconds: windowOf(p),
        phases: p === "gateway",
      });
      if (pid) share.get(p)!.push((cpuMs(pid) - c0) / (res.seconds * 1000));
      if (pid && res.seconds > 1.5 * windowOf(p)) {
        behind++;
      }
      p99.get(p)!.push(percentile(res.latencies, 99));
      p50.get(p)!.push(median(res.latencies));
      if (p === "gateway") {
        ok += res.ok;
        const cut = percentile(res.latencies, 99);
        res.latencies.forEach((l, i) => {
          const ph = phasesOf(l, res.timingHeaders![i]);
          if (l >= cut) slow.push(ph);
          else typical.push(ph);
        });
        over5 += res.latencies.filter((l) => l > 5).length;
      }
      o.log(
        `tail window ${r + 1}: ${p} ${res.ok} ok, p50 ${fmt(median(res.latencies), 3)} p99 ${
          fmt(percentile(res.latencies, 99), 3)
        } ms${pid ? `, core ${fmt(100 * share.get(p)!.at(-1)!, 0)}%` : ""}`,
      );
    }
  }
  const m = (map: Map<TailPath, number[]>, p: TailPath) => median(map.get(p)!);
  const added = (map: Map<TailPath, number[]>, p: TailPath) => m(map, p) - m(map, "direct");
  const ms = (v: number) => fmt(v, 3);
  const ph = (xs: Phases[], k: keyof Phases) => ms(median(xs.map((x) => x[k])));
  const cell = (xs: Phases[]) =>
    `outside the handler ${ph(xs, "outside")} · own work ${ph(xs, "own")} · upstream ${
      ph(xs, "upstream")
    } · durable commit ${ph(xs, "commit")}`;
  const ratio = m(share, "gateway") / m(share, "floor");
  return {
    ok,
    rows: [
      {
        metric: `#27 tail: added p50 / p99 vs direct at ${o.rate} req/s, ${o.rounds} window(s) ` +
          `of ${seconds} s for the gateway (${windowOf("floor")} s for the floor and the mock), ` +
          `alternating (ms)`,
        floor: `${ms(added(p50, "floor"))} / ${ms(added(p99, "floor"))}`,
        gateway: `${ms(added(p50, "gateway"))} / ${ms(added(p99, "gateway"))}`,
        target: `p99 ≤ 5 ms over windows ≥ ${TAIL_WINDOW_S} s`,
        verdict: atMost(added(p99, "gateway"), 5, "ms", 3),
      },
      {
        metric: `#27 what sets the tail: the gateway's slowest 1% at ${o.rate} req/s against ` +
          `the other 99%, median ms per part (its Server-Timing; "outside" = queued behind ` +
          `the event loop: GC pauses, other requests; ${over5} answers > 5 ms)`,
        gateway: `slowest 1%: ${cell(slow)}; the rest: ${cell(typical)}`,
      },
      {
        metric: `#27 moderate load: share of its core at ${o.rate} req/s (gateway ÷ floor)`,
        floor: `${fmt(100 * m(share, "floor"), 0)}%`,
        gateway: `${fmt(100 * m(share, "gateway"), 0)}% (${fmt(ratio, 2)}×)`,
        target: "≤ 2× the floor's",
        // A server behind the rate gets what the machine leaves it, not what the load needs.
        verdict: behind > 0
          ? `not measurable: ${behind} window(s) fell behind the rate (the machine is busier ` +
            "than the load)"
          : atMost(ratio, 2, "×", 2),
      },
    ],
  };
}

if (import.meta.main) {
  // deno run -A bench/tail_window.ts [--rounds N] [--seconds S]: a fresh floor and gateway.
  const { runStandalone } = await import("./standalone.ts");
  const { gatewayModel, startGateway } = await import("./gateway_setup.ts");
  const { spawnPinned } = await import("./processes.ts");
  const { closedLoop } = await import("./load.ts");
  await runStandalone("tail", { rounds: 2, seconds: TAIL_WINDOW_S }, async (o) => {
    const gw = await startGateway(o.dir, o.mockUrl, o.serverCpu);
    const floor = await spawnPinned(
      o.serverCpu,
      ["run", "-A", "bench/receipt_floor.ts", o.mockUrl, `${o.dir}/floor.kv`],
      /floor listening on (\S+)/,
    );
    try {
      const targets = {
        direct: { base: o.mockUrl, headers: {}, model: (m: string) => m },
        floor: { base: floor.url, headers: {}, model: (m: string) => m },
        gateway: {
          base: gw.url,
          headers: { authorization: `Bearer ${gw.key}` },
          model: gatewayModel,
        },
      };
      // Warm as the main rounds leave them: a closed loop, then the rate itself.
      for (const t of [targets.floor, targets.gateway]) {
        await closedLoop(t, { concurrency: 32, seconds: 3 });
        await openLoop(t, { rate: 500, seconds: 2 });
      }
      return (await tailRows({
        targets,
        pids: { floor: floor.pid, gateway: gw.pid },
        rate: 500,
        rounds: o.rounds,
        seconds: o.seconds,
        log: o.log,
      })).rows;
    } finally {
      await floor.stop();
      await gw.stop();
    }
  });
}
