/**
 * The peer ratios on fresh processes (the headline, #27): a new gateway, a
 * new receipt floor and a new Portkey, each warmed up for 10 s at c=32
 * (Portkey needs that long), then measured at c=32 and at c=1 (with the mock
 * directly, for the added latency), in alternating rounds. In the main rounds every server has
 * first run all the other loads (c=1, c=128, open loops, streams), and there
 * Portkey spends about twice the CPU per request it spends fresh, so the
 * headline ratio depends on that history; this row shows it without. The
 * floor's column is the bound: no gateway that meets the receipt rule can be
 * cheaper per request than the floor.
 *
 *   deno run -A bench/peer_fresh.ts [--rounds N] [--seconds S]
 */
import { closedLoop, streamLoop, type Target } from "./load.ts";
import { gatewayModel, type GatewayUnderTest, startGateway } from "./gateway_setup.ts";
import {
  cpuMs,
  type EarlyStarts,
  type Server,
  spawnPinned,
  startAll,
  takeOr,
} from "./processes.ts";
import { peerTarget, startPeer } from "./peer.ts";
import { median } from "./stats.ts";
import { atLeast, atMost, fmt, type Row } from "./report.ts";
import { type MeasureOptions, runStandalone } from "./standalone.ts";

const CONCURRENCY = 32;
const WARMUP_SECONDS = 10;

/** A fresh gateway, receipt floor and Portkey: this row's, and in `--quick` the prompt sizes' too. */
export interface FreshTrio {
  gw: GatewayUnderTest;
  floor: Server;
  peer: Server;
}

/** How each of a trio starts (in `o.dir`); `limits` as startGateway's. */
const trioRecipes = (o: MeasureOptions, limits?: Record<string, number>) => ({
  gateway: async () => {
    await Deno.mkdir(o.dir, { recursive: true });
    return startGateway(o.dir, o.mockUrl, o.serverCpu, [], undefined, {}, undefined, limits);
  },
  floor: async () => {
    await Deno.mkdir(o.dir, { recursive: true });
    return spawnPinned(
      o.serverCpu,
      ["run", "-A", "bench/receipt_floor.ts", o.mockUrl, `${o.dir}/floor.kv`],
      /floor listening on (\S+)/,
    );
  },
  peer: () => startPeer(o.serverCpu),
});

/** `--quick`: the trio started ahead (bench/processes.ts EarlyStarts). */
export function trioEarly(o: MeasureOptions, early: EarlyStarts, limits?: Record<string, number>) {
  const r = trioRecipes(o, limits);
  early.start("trio/gateway", r.gateway);
  early.start("trio/floor", r.floor);
  early.start("trio/peer", r.peer);
}

/** Starts a trio in `dir` (sequentially unless `concurrent`), or takes the one started ahead. */
export async function startTrio(
  o: MeasureOptions,
  limits?: Record<string, number>,
): Promise<FreshTrio> {
  await Deno.mkdir(o.dir, { recursive: true });
  const r = trioRecipes(o, limits);
  const [gw, floor, peer] = await startAll(o.concurrentStarts ?? false, [
    () => takeOr(o.early, "trio/gateway", r.gateway),
    () => takeOr(o.early, "trio/floor", r.floor),
    () => takeOr(o.early, "trio/peer", r.peer),
  ]);
  return { gw, floor, peer };
}

export const stopTrio = async (t: FreshTrio) => {
  await t.peer.stop();
  await t.floor.stop();
  await t.gw.stop();
};

/** `trio`: servers started (and stopped) by the caller, still fresh when this row runs. */
export async function peerFreshRows(o: MeasureOptions & { trio?: FreshTrio }): Promise<Row[]> {
  const own = o.trio ? undefined : await startTrio(o);
  const { gw, floor, peer } = o.trio ?? own!;
  try {
    const paths: [string, Server, Target][] = [
      ["gateway", gw, {
        base: gw.url,
        headers: { authorization: `Bearer ${gw.key}` },
        model: gatewayModel,
      }],
      ["floor", floor, { base: floor.url, headers: {}, model: (m) => m }],
      ["peer", peer, peerTarget(peer, o.mockUrl)],
    ];
    const warm = o.warmSeconds ?? WARMUP_SECONDS;
    for (const [, , t] of paths) {
      await closedLoop(t, { concurrency: CONCURRENCY, seconds: warm });
    }
    const rps = new Map<string, number[]>(paths.map(([n]) => [n, []]));
    const cpu = new Map<string, number[]>(paths.map(([n]) => [n, []]));
    const single = new Map<string, number[]>(
      [...paths.map(([n]) => n), "direct"].map((n) => [n, []]),
    );
    const direct: Target = { base: o.mockUrl, headers: {}, model: (m) => m };
    const firstChunk = new Map<string, number[]>();
    for (let r = 0; r < o.rounds; r++) {
      const order = paths.map((_, i) => paths[(i + r) % paths.length]);
      for (const [name, s, t] of order) {
        const c0 = cpuMs(s.pid);
        const res = await closedLoop(t, { concurrency: CONCURRENCY, seconds: o.seconds });
        rps.get(name)!.push(res.ok / res.seconds);
        cpu.get(name)!.push(((cpuMs(s.pid) - c0) * 1000) / Math.max(1, res.ok));
      }
      // One request at a time, the mock directly among them for the added latency.
      for (
        const [name, t] of [
          ...order.map(([n, , t]) => [n, t] as const),
          ["direct", direct] as const,
        ]
      ) {
        const res = await closedLoop(t, { concurrency: 1, seconds: o.seconds });
        single.get(name)!.push(median(res.latencies));
        // One stream at a time: its first chunk (not Portkey's: it sleeps 25 ms before it).
        if (name !== "peer") {
          const streams = await streamLoop(t, { concurrency: 1, seconds: o.seconds });
          (firstChunk.get(name) ?? firstChunk.set(name, []).get(name)!).push(
            median(streams.map((x) => x.firstToken)),
          );
        }
      }
      o.log(
        `fresh peer round ${r + 1}: ` +
          paths.map(([n]) =>
            `${n} ${fmt(rps.get(n)!.at(-1)!, 0)} rps ${fmt(cpu.get(n)!.at(-1)!, 0)} µs, c=1 ${
              fmt(single.get(n)!.at(-1)!, 3)
            } ms`
          ).join(", ") + `; direct c=1 ${fmt(single.get("direct")!.at(-1)!, 3)} ms`,
      );
    }
    const m = (map: Map<string, number[]>, n: string) => median(map.get(n)!);
    const added = (n: string) => m(single, n) - m(single, "direct");
    const chunkAdded = (n: string) => m(firstChunk, n) - m(firstChunk, "direct");
    const ms = (v: number) => fmt(v, 3);
    return [
      {
        metric: `Fresh processes, c=${CONCURRENCY} only (each warmed ${warm} s, ` +
          `${o.rounds} alternating rounds of ${o.seconds} s): throughput (req/s) / ` +
          `server CPU per request (µs)`,
        floor: `${fmt(m(rps, "floor"), 0)} / ${fmt(m(cpu, "floor"), 0)}`,
        gateway: `${fmt(m(rps, "gateway"), 0)} / ${fmt(m(cpu, "gateway"), 0)}`,
        peer: `${fmt(m(rps, "peer"), 0)} / ${fmt(m(cpu, "peer"), 0)}`,
      },
      {
        metric: "**Peer (headline)**, fresh warmed processes: throughput / Portkey's (c=32; the " +
          "floor's is the most any gateway meeting the receipt rule can reach)",
        floor: `${fmt(m(rps, "floor") / m(rps, "peer"))}×`,
        gateway: `${fmt(m(rps, "gateway") / m(rps, "peer"))}×`,
        target: "≥ 5×",
        verdict: atLeast(m(rps, "gateway") / m(rps, "peer"), 5, "×", 2),
      },
      {
        metric: "**Peer (headline)**, fresh warmed processes: added p50 vs direct, one request " +
          "at a time (c=1) (ms)",
        floor: ms(added("floor")),
        gateway: ms(added("gateway")),
        peer: ms(added("peer")),
        target: "#27: ≤ Portkey's and ≤ the floor's + 0.3 ms; #19: ≤ ½ Portkey's",
        verdict: `Portkey's: ${atMost(added("gateway"), added("peer"), "ms", 3)}; floor + 0.3: ${
          atMost(added("gateway"), added("floor") + 0.3, "ms", 3)
        }; ½ Portkey's: ${atMost(added("gateway"), added("peer") / 2, "ms", 3)}`,
      },
      {
        metric: "#27 first chunk added vs direct, one stream at a time (c=1), fresh processes (ms)",
        floor: ms(chunkAdded("floor")),
        gateway: ms(chunkAdded("gateway")),
        target: "≤ 1 ms",
        verdict: atMost(chunkAdded("gateway"), 1, "ms", 3),
      },
    ];
  } finally {
    if (own) await stopTrio(own);
  }
}

if (import.meta.main) await runStandalone("peer", { rounds: 4, seconds: 3 }, peerFreshRows);
