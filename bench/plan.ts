/**
 * How long `task bench` measures: the full plan, or `--quick` (#27, #31): the
 * same rows from fewer and shorter rounds, fewer held streams and requests,
 * shorter settles and no profile, within a minute of wall-clock on this kind of
 * machine. Quick figures are noisier and never written to bench/RESULTS.md.
 *
 * What `--quick` shares (`shareServers`): the held streams run on the main
 * bare proxy and gateway (the verified path's on a fresh gateway started with
 * the main servers), and the prompt-size rows on the fresh-peer row's floor,
 * gateway and Portkey rather than three more. Every section starts its servers
 * concurrently, each on every core until it listens, and the later sections'
 * first servers start during the held streams, frozen until their rows
 * (bench/processes.ts EarlyStarts).
 */
import { type PromptSizePlan, promptSizePlan } from "./prompt_size.ts";

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
  /** Metrics on vs off (bench/metrics_cost.ts): `warmSeconds` per gateway of each pair. */
  metrics: { rounds: number; seconds: number; warmSeconds: number };
  /** The peer ratio on fresh processes (three servers, each warmed first). */
  peer: { rounds: number; seconds: number; warmSeconds: number };
  /** Rounds of windows at 500 req/s (#27): 8 s for the gateway, `referenceSeconds` for floor and mock. */
  tail: { rounds: number; referenceSeconds: number };
  /** Held streams' fixed waits, ms (bench/held_rss.ts). */
  heldWaits: HeldWaits;
  /** Verifying client (bench/verifying_client.ts): SDK requests per path and batch. */
  verifying: { rounds: number; batch: number; warmups: number };
  /** The transparency log's pairs (bench/tlog_cost.ts) and the workers' sets (bench/workers.ts). */
  tlog: { rounds: number; seconds: number; warmSeconds: number };
  workers: { rounds: number; seconds: number; warmSeconds: number };
  promptSizes: PromptSizePlan;
  /** `--quick`: servers shared across rows and started concurrently (above). */
  shareServers: boolean;
}

export interface HeldWaits {
  /** After the streams opened, before RSS is read at their peak. */
  settleMs: number;
  /** After the warm-up streams closed, before the idle RSS. */
  idleMs: number;
  /** After the streams closed, before the last RSS. */
  afterMs: number;
}

/** The verifying client's paths (bench/verifying_client.ts) and the SDK requests' time each. */
export const VERIFYING_PATHS = 7;
/** Seconds per SDK request there, as measured (#27: 161 requests in ~31 s on a quiet machine). */
export const VERIFYING_REQUEST_S = 0.19;

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
    const seconds = flag("seconds", 0.2);
    return {
      quick,
      rounds,
      seconds,
      warmSeconds: 0.1,
      warmupRound: false,
      heldStreams: 100,
      heldSamples: 1,
      profile: false,
      metrics: { rounds: 1, seconds, warmSeconds: 0.25 },
      peer: { rounds: 1, seconds, warmSeconds: 0.25 },
      tail: { rounds: 1, referenceSeconds: 1 },
      heldWaits: { settleMs: 250, idleMs: 200, afterMs: 300 },
      // One whole and one streamed answer per path: the verifying rows are the slowest per request.
      verifying: { rounds: Math.max(1, Math.min(rounds, 4)), batch: 1, warmups: 1 },
      tlog: { rounds, seconds, warmSeconds: 0.25 },
      workers: { rounds, seconds, warmSeconds: 0.25 },
      // No per-size warm-up: the shared servers come warm from the fresh-peer row.
      promptSizes: {
        rounds: 1,
        seconds: 0.2,
        warmSeconds: 0,
        agentRounds: 1,
        agentTurns: 4,
        agentWarmTurns: 2,
      },
      shareServers: true,
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
      warmSeconds: 1,
    },
    peer: { rounds, seconds: Math.max(seconds, 3), warmSeconds: 10 },
    tail: { rounds: 2, referenceSeconds: 8 },
    heldWaits: { settleMs: 500, idleMs: 1000, afterMs: 2000 },
    verifying: { rounds: Math.max(1, Math.min(rounds, 4)), batch: 10, warmups: 3 },
    // Both sides of a round run at once (bench/tlog_cost.ts): twice the rounds in the same time.
    tlog: { rounds: 2 * rounds, seconds: Math.max(seconds, 3), warmSeconds: 2 },
    workers: { rounds, seconds: Math.max(seconds, 3), warmSeconds: 1 },
    promptSizes: promptSizePlan(false),
    shareServers: false,
  };
}

/**
 * Seconds of load the plan generates (server start-up excluded: `startupSeconds`).
 * The quick plan's budget is checked by bench/plan_test.ts.
 */
export function loadSeconds(p: BenchPlan): number {
  const perRound = PATH_COUNT * (p.warmSeconds + LOADS_PER_PATH * p.seconds);
  const rounds = p.rounds + (p.warmupRound ? 1 : 0);
  // Held streams: three paths, each sample two cycles (settle) and the waits between.
  const w = p.heldWaits;
  const held = 3 * p.heldSamples * (2 * w.settleMs + w.idleMs + w.afterMs) / 1000;
  // E2EE rows: alternating batches for 2 × seconds; profile 2 × 3 s.
  const e2ee = 2 * p.seconds;
  const profile = p.profile ? 6 : 0;
  // Verifying client: every path's warm-up requests, then per round a whole and a streamed batch.
  const v = p.verifying;
  const verifying = VERIFYING_PATHS * (v.warmups + v.rounds * 2 * v.batch) * VERIFYING_REQUEST_S;
  // Metrics cost: per pair a warm-up of each, then rounds × 2 sides.
  const pairs = Math.max(1, Math.ceil(p.metrics.rounds / 2));
  const metrics = pairs * 2 * p.metrics.warmSeconds + p.metrics.rounds * 2 * p.metrics.seconds;
  // The log's pairs: a warm-up and rounds (both sides at once), and one inclusion phase per pair.
  const tlogPairs = Math.max(1, Math.ceil(p.tlog.rounds / 2));
  const tlog = tlogPairs * (p.tlog.warmSeconds + p.tlog.seconds) + p.tlog.rounds * p.tlog.seconds;
  // Workers: per set a warm-up of its three configurations, then rounds × 3 (the scaling
  // row runs only on > 2 cores and is not counted).
  const sets = Math.max(1, Math.ceil(p.workers.rounds / 2));
  const workers = sets * 3 * p.workers.warmSeconds + p.workers.rounds * 3 * p.workers.seconds;
  // Peer ratio on fresh processes: three servers warmed, then alternating rounds of c=32, c=1
  // (with the mock directly) and one stream at a time (not Portkey's).
  const peer = 3 * p.peer.warmSeconds + p.peer.rounds * 10 * p.peer.seconds;
  // The tail: the gateway's window of 8 s, the floor's and the mock's.
  const tail = p.tail.rounds * (8 + 2 * p.tail.referenceSeconds);
  // Prompt sizes: four paths per size, warmed, then c=N for `seconds` and c=1 for half. A
  // 1 MB loop lasts at least a request per connection (8 at ~15 req/s: ~0.6 s), whatever its
  // seconds.
  const ps = p.promptSizes;
  const loop = (kib: number, s: number) => s === 0 ? 0 : kib >= 1024 ? Math.max(s, 0.6) : s;
  const prompt = (ps.sizesKiB ?? PROMPT_SIZES).reduce(
    (a, kib) =>
      a + 4 * (loop(kib, ps.warmSeconds) + ps.rounds * (loop(kib, ps.seconds) + ps.seconds / 2)),
    0,
  );
  return rounds * perRound + held + e2ee + profile + verifying + metrics + tlog + workers +
    peer + tail + prompt;
}

/** Prompt sizes when the plan names none (bench/prompt_size.ts PROMPT_KIB). */
const PROMPT_SIZES = [1, 32, 256, 1024];

/**
 * A fresh server's start-up, seconds, on a quiet machine: a gateway measured 1.1–1.3 s (CPU
 * bound, one thread), a floor or bare proxy 0.3 s, Portkey about 1 s. One allowance per
 * process, sequential; with `shareServers` a section's processes start together over two
 * cores, so a section costs half its sum (never less than its slowest start-up), and later
 * sections' servers start during the held streams.
 */
export const STARTUP_S = { gateway: 1.3, small: 0.3, peer: 1, proxy: 1 };

/** Seconds of start-ups the plan waits for (the bench process's own boot excluded). */
export function startupSeconds(p: BenchPlan): number {
  const { gateway: g, small: s, peer: k, proxy: x } = STARTUP_S;
  const sum = (each: number[]) => each.reduce((a, b) => a + b, 0);
  const section = (...each: number[]) =>
    p.shareServers ? Math.max(...each, sum(each) / 2) : sum(each);
  const metricsPairs = Math.max(1, Math.ceil(p.metrics.rounds / 2));
  const tlogPairs = Math.max(1, Math.ceil(p.tlog.rounds / 2));
  const sets = Math.max(1, Math.ceil(p.workers.rounds / 2));
  const main = section(s, s) + section(s, s, g, k, ...(p.shareServers ? [g] : []));
  if (p.shareServers) {
    // The first of every later section's servers start during the held streams (EarlyStarts),
    // but the two-worker gateway (a supervisor and its two workers) and further pairs or sets.
    const w = p.heldWaits;
    const held = 3 * p.heldSamples * (2 * w.settleMs + w.idleMs + w.afterMs) / 1000;
    const ahead = section(x, x, g, g, g, g, g, g, g, g, s, k);
    return main + Math.max(0, ahead - held) + sets * section(g, g) +
      (metricsPairs - 1 + tlogPairs - 1) * section(g, g) + (sets - 1) * section(g, g, g);
  }
  const heldFresh = 3 * p.heldSamples - 2; // the verified path's each; bare and gateway after the 1st
  return main + heldFresh * g +
    section(x, x) + // the verifying proxies
    metricsPairs * section(g, g) +
    tlogPairs * section(g, g) +
    sets * section(g, g, g, g, g) + // one worker, two (a supervisor and 2), the control's two
    section(g, s, k) + // fresh peer row
    section(g, s, k) + // prompt sizes' own
    (p.profile ? g : 0);
}
