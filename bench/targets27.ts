/**
 * Issue #27's rows over the main rounds' figures: one request at a time
 * (c=1) against Portkey and against the receipt floor + 0.3 ms (for
 * reference: the verdict is on fresh, warmed processes in bench/peer_fresh.ts,
 * where Portkey has not been slowed by the run's other loads), and the first
 * chunk. The tail's verdict needs windows of at least 8 s: bench/tail_window.ts.
 */
import { median } from "./stats.ts";
import { atMost, fmt, type Row } from "./report.ts";

type Path = "direct" | "bare" | "floor" | "gateway" | "verified" | "peer";
type Metric = "singleP50" | "openP99" | "firstToken";
type Stats = Record<Path, Record<Metric, number[]>>;

export function issue27Rows(
  stats: Stats,
  o: { rate: number; streams: number; seconds: number },
): Row[] {
  const med = (p: Path, k: Metric) => median(stats[p][k]);
  const added = (p: Path, k: Metric) => med(p, k) - med("direct", k);
  const ms = (v: number) => fmt(v, 3);
  return [
    {
      metric: "#27 c=1 added p50, main rounds (Portkey after every load of the run): gateway, " +
        "floor, Portkey (ms)",
      floor: ms(added("floor", "singleP50")),
      gateway: ms(added("gateway", "singleP50")),
      peer: ms(added("peer", "singleP50")),
      target: "≤ Portkey's; ≤ floor + 0.3 ms (verdict: fresh processes below)",
      verdict: "for reference",
    },
    {
      metric: `#27 first chunk added vs direct, ${o.streams} concurrent streams (ms)`,
      gateway: ms(added("gateway", "firstToken")),
      target: "≤ 1 ms",
      verdict: atMost(added("gateway", "firstToken"), 1, "ms", 3),
    },
  ];
}
