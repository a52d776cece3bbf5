/**
 * The peer ratio on fresh processes: a new gateway, a new receipt floor and a
 * new Portkey, each warmed up for 10 s at c=32 (Portkey needs that long), then
 * measured at c=32 only, in alternation. In the main rounds every server has
 * first run all the other loads (c=1, c=128, open loops, streams), and there
 * Portkey spends about twice the CPU per request it spends fresh, so the
 * headline ratio depends on that history; this row shows it without. The
 * floor's column is the bound: no gateway that meets the receipt rule can be
 * cheaper per request than the floor.
 *
 *   deno run -A bench/peer_fresh.ts [--rounds N] [--seconds S]
 */
import { closedLoop, type Target } from "./load.ts";
import { gatewayModel, startGateway } from "./gateway_setup.ts";
import { cpuMs, type Server, spawnPinned } from "./processes.ts";
import { peerTarget, startPeer } from "./peer.ts";
import { median } from "./stats.ts";
import { fmt, type Row } from "./report.ts";
import { type MeasureOptions, runStandalone } from "./standalone.ts";

const CONCURRENCY = 32;
const WARMUP_SECONDS = 10;

export async function peerFreshRows(o: MeasureOptions): Promise<Row[]> {
  await Deno.mkdir(o.dir, { recursive: true });
  const servers: Server[] = [];
  try {
    const gw = await startGateway(o.dir, o.mockUrl, o.serverCpu);
    servers.push(gw);
    const floor = await spawnPinned(
      o.serverCpu,
      ["run", "-A", "bench/receipt_floor.ts", o.mockUrl, `${o.dir}/floor.kv`],
      /floor listening on (\S+)/,
    );
    servers.push(floor);
    const peer = await startPeer(o.serverCpu);
    servers.push(peer);
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
    for (let r = 0; r < o.rounds; r++) {
      const order = paths.map((_, i) => paths[(i + r) % paths.length]);
      for (const [name, s, t] of order) {
        const c0 = cpuMs(s.pid);
        const res = await closedLoop(t, { concurrency: CONCURRENCY, seconds: o.seconds });
        rps.get(name)!.push(res.ok / res.seconds);
        cpu.get(name)!.push(((cpuMs(s.pid) - c0) * 1000) / Math.max(1, res.ok));
      }
      o.log(
        `fresh peer round ${r + 1}: ` +
          paths.map(([n]) =>
            `${n} ${fmt(rps.get(n)!.at(-1)!, 0)} rps ${fmt(cpu.get(n)!.at(-1)!, 0)} µs`
          ).join(", "),
      );
    }
    const m = (map: Map<string, number[]>, n: string) => median(map.get(n)!);
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
        metric: "Fresh processes: throughput / Portkey's (c=32; the floor's is the most any " +
          "gateway meeting the receipt rule can reach)",
        floor: `${fmt(m(rps, "floor") / m(rps, "peer"))}×`,
        gateway: `${fmt(m(rps, "gateway") / m(rps, "peer"))}×`,
        target: "≥ 5× (the headline row above is from the main rounds)",
        verdict: "for reference",
      },
    ];
  } finally {
    for (const s of servers.reverse()) await s.stop();
  }
}

if (import.meta.main) await runStandalone("peer", { rounds: 4, seconds: 3 }, peerFreshRows);
