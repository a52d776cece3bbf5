/**
 * The rows issue #19 added to the benchmark table: the verified confidential
 * path and the peer (Portkey) beside the plain gateway, and the targets, each
 * a ratio within one run, with its verdict (and by how much it is missed).
 */
import { median } from "./stats.ts";
import { atMost, fmt, type Row } from "./report.ts";

type Path = "direct" | "bare" | "floor" | "gateway" | "verified" | "peer";
type Metric =
  | "rps"
  | "cpuPerReq"
  | "singleP50"
  | "singleCpu"
  | "openP50"
  | "openP99"
  | "firstToken"
  | "handshakes"
  | "handshakesAll";
type Stats = Record<Path, Record<Metric, number[]>>;

export function issue19Rows(stats: Stats, rate: number, streams: number): Row[] {
  const med = (p: Path, k: Metric) => median(stats[p][k]);
  const added = (p: Path, k: Metric) => med(p, k) - med("direct", k);
  const ms = (v: number) => fmt(v, 3);
  const three = (k: Metric, f: (v: number) => string, addedVs = false): Partial<Row> => ({
    gateway: f(addedVs ? added("gateway", k) : med("gateway", k)),
    verified: f(addedVs ? added("verified", k) : med("verified", k)),
    peer: f(addedVs ? added("peer", k) : med("peer", k)),
  });
  const gwAddedSingle = added("gateway", "singleP50");
  const peerAddedSingle = added("peer", "singleP50");
  return [
    {
      metric: "#19 columns: throughput, closed loop c=32 (req/s)",
      ...three("rps", (v) => fmt(v, 0)),
    },
    {
      metric: "#19 columns: server CPU per request at c=32 (µs, all threads)",
      ...three("cpuPerReq", (v) => fmt(v, 0)),
    },
    {
      metric: "#19 columns: added p50 vs direct, one request at a time (c=1) (ms)",
      ...three("singleP50", ms, true),
    },
    {
      metric: `#19 columns: added p50 / p99 vs direct at ${rate} req/s (ms)`,
      gateway: `${ms(added("gateway", "openP50"))} / ${ms(added("gateway", "openP99"))}`,
      verified: `${ms(added("verified", "openP50"))} / ${ms(added("verified", "openP99"))}`,
      peer: `${ms(added("peer", "openP50"))} / ${ms(added("peer", "openP99"))}`,
    },
    {
      metric:
        `#19 columns: added first-token delay vs direct, ${streams} concurrent streams (ms; Portkey sleeps 25 ms before a stream's first event by design)`,
      ...three("firstToken", ms, true),
    },
    {
      metric:
        "Verified path: TLS handshakes per request at the upstream, c=32 after a 0.5 s warm-up (steady state); in brackets the other loads (c=1, c=128 past the 64-idle pool cap, open loop, streams)",
      verified: `${fmt(med("verified", "handshakes"), 4)} (${
        fmt(med("verified", "handshakesAll"), 4)
      })`,
      target: "0",
      verdict: atMost(med("verified", "handshakes"), 0, "handshakes/request", 4),
    },
    {
      metric: `Verified path: added p50 vs the plain path at ${rate} req/s (ms)`,
      verified: ms(med("verified", "openP50") - med("gateway", "openP50")),
      target: "≤ 0.1 ms",
      verdict: atMost(med("verified", "openP50") - med("gateway", "openP50"), 0.1, "ms", 3),
    },
    {
      metric: "Verified path: added first-token delay vs the plain path (ms)",
      verified: ms(med("verified", "firstToken") - med("gateway", "firstToken")),
      target: "≤ 0.1 ms",
      verdict: atMost(med("verified", "firstToken") - med("gateway", "firstToken"), 0.1, "ms", 3),
    },
    {
      metric: "Peer, main rounds (Portkey after every load of the run; the headline is the " +
        "fresh, warmed Portkey's below): gateway throughput / Portkey's (c=32)",
      gateway: `${fmt(med("gateway", "rps") / med("peer", "rps"), 2)}×`,
      target: "≥ 5×",
      verdict: "for reference",
    },
    {
      metric: "Peer, main rounds: gateway unloaded (c=1) added latency / Portkey's",
      gateway: `${fmt(gwAddedSingle / peerAddedSingle, 2)}×`,
      target: "≤ 0.5×",
      verdict: "for reference",
    },
    {
      metric: `Tail: gateway added p99 vs direct at ${rate} req/s (ms)`,
      gateway: ms(added("gateway", "openP99")),
      target: "≤ 5 ms",
      verdict: atMost(added("gateway", "openP99"), 5, "ms", 3),
    },
    {
      metric: "Limit: gateway CPU per request / receipt floor's (c=32)",
      gateway: `${fmt(med("gateway", "cpuPerReq") / med("floor", "cpuPerReq"), 2)}×`,
      target: "≤ 1.3×",
      verdict: atMost(med("gateway", "cpuPerReq") / med("floor", "cpuPerReq"), 1.3, "×", 2),
    },
    {
      metric: "Limit: receipt floor CPU per request / bare proxy's (c=32)",
      floor: `${fmt(med("floor", "cpuPerReq") / med("bare", "cpuPerReq"), 2)}×`,
      target: "≤ 2.5×",
      verdict: atMost(med("floor", "cpuPerReq") / med("bare", "cpuPerReq"), 2.5, "×", 2),
    },
  ];
}
