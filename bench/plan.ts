/**
 * How long `task bench` measures: the full plan, or `--quick` (#27, #31): the
 * same rows from fewer and shorter rounds, fewer held streams and no profile,
 * within a minute of load on this kind of machine. Quick figures are noisier
 * and never written to bench/RESULTS.md.
 */

export interface BenchPlan {
  quick: boolean;
  /** Measured rounds over every path, and seconds per load. */
  rounds: number;
  seconds: number;
  /** Seconds of each path's unrecorded warm-up load before its measured loads. */
  warmSeconds: number;
  /** An unrecorded whole round before the measured ones (heap growth ramp). */
  warmupRound: boolean;
  heldStreams: number;
  heldSamples: number;
  profile: boolean;
  metrics: { rounds: number; seconds: number };
  /** The peer ratio on fresh processes (three servers, each warmed first). */
  peer: { rounds: number; seconds: number; warmSeconds: number };
  /** Rounds of windows at 500 req/s (#27): 8 s for the gateway, `referenceSeconds` for floor and mock. */
  tail: { rounds: number; referenceSeconds: number };
}

/** Loads per path per round (closed c=32, c=1, c=128, open, open delayed, streams). */
export const LOADS_PER_PATH = 6;
export const PATH_COUNT = 6;

/** `flag(name, def)` reads `--name N` (bench/standalone.ts numFlag); `has` a bare flag. */
export function benchPlan(
  has: (flag: string) => boolean,
  flag: (name: string, def: number) => number,
): BenchPlan {
  const quick = has("--quick");
  if (quick) {
    const rounds = flag("rounds", 1);
    const seconds = flag("seconds", 0.5);
    return {
      quick,
      rounds,
      seconds,
      warmSeconds: 0.2,
      warmupRound: false,
      heldStreams: 100,
      heldSamples: 1,
      profile: false,
      metrics: { rounds: 1, seconds },
      peer: { rounds: 1, seconds, warmSeconds: 1 },
      tail: { rounds: 1, referenceSeconds: 2 },
    };
  }
  const rounds = flag("rounds", 4);
  const seconds = flag("seconds", 2);
  return {
    quick,
    rounds,
    seconds,
    warmSeconds: 0.5,
    warmupRound: true,
    heldStreams: 500,
    heldSamples: 3,
    profile: !has("--no-profile"),
    // A 2% effect needs more samples than the other rows (bench/metrics_cost.ts).
    metrics: {
      rounds: rounds >= 4 ? Math.max(rounds, 16) : rounds,
      seconds: rounds >= 4 ? Math.max(seconds, 3) : seconds,
    },
    peer: { rounds, seconds: Math.max(seconds, 3), warmSeconds: 10 },
    tail: { rounds: 2, referenceSeconds: 8 },
  };
}

/**
 * Seconds of load the plan generates (server start-up excluded: a few seconds per
 * fresh process). The quick plan's budget is checked by bench/plan_test.ts.
 */
export function loadSeconds(p: BenchPlan): number {
  const perRound = PATH_COUNT * (p.warmSeconds + LOADS_PER_PATH * p.seconds);
  const rounds = p.rounds + (p.warmupRound ? 1 : 0);
  // Held streams: three paths, each sample ≈ 2 s settle + 2 s after close.
  const held = 3 * p.heldSamples * 4;
  // E2EE rows: alternating batches for 2 × seconds; profile 2 × 3 s.
  const e2ee = 2 * p.seconds;
  const profile = p.profile ? 6 : 0;
  // Metrics cost: per pair 2 × 1 s warm-up, then rounds × 2 sides.
  const pairs = Math.max(1, Math.ceil(p.metrics.rounds / 2));
  const metrics = pairs * 2 + p.metrics.rounds * 2 * p.metrics.seconds;
  // Peer ratio on fresh processes: three servers warmed, then alternating rounds of c=32, c=1
  // (with the mock directly) and one stream at a time (not Portkey's).
  const peer = 3 * p.peer.warmSeconds + p.peer.rounds * 10 * p.peer.seconds;
  // The tail: the gateway's window of 8 s, the floor's and the mock's.
  const tail = p.tail.rounds * (8 + 2 * p.tail.referenceSeconds);
  return rounds * perRound + held + e2ee + profile + metrics + peer + tail;
}
