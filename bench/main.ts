/**
 * `deno task bench [--quick] [--write] [--rounds N] [--seconds S] [--no-profile]`: the
 * gateway's added cost under load, measured against a mock upstream directly,
 * through a bare `fetch` proxy (the floor), through the receipt floor (that
 * proxy plus only a receipt's mandatory hashing, signing and durable commit:
 * bench/receipt_floor.ts) and through the real gateway (separate process, KV
 * on a temp disk file). Servers under test run on core
 * 0, this load generator and the mock on core 1. Paths alternate within each
 * round; figures are medians of round medians. Prints one markdown table;
 * `--write` also replaces the generated block of bench/RESULTS.md. `--quick`
 * prints the same rows from a reduced plan, servers shared and started together
 * (bench/plan.ts: about a minute), and how long it took.
 */
import {
  closedLoop,
  type LoadResult,
  openLoop,
  receiptSink,
  streamLoop,
  type Target,
} from "./load.ts";
import {
  cpuMs,
  EarlyStarts,
  machine,
  pinSelf,
  ROOT,
  rssBytes,
  type Server,
  spawnPinned,
  startAll,
  startOnEveryCore,
  threadCpuMs,
} from "./processes.ts";
import { kvCommitLatency } from "./kv_probe.ts";
import {
  gatewayModel,
  type GatewayUnderTest,
  startGateway,
  storedReceiptIds,
  verifiedModel,
} from "./gateway_setup.ts";
import { profileGateway } from "./profile_run.ts";
import { median, percentile } from "./stats.ts";
import { atLeast, atMost, fmt, renderTable, type Row, writeResults } from "./report.ts";
import { CHUNK_GAP_MS, DELAY_MS, STREAM_CHUNKS } from "./mock_upstream.ts";
import { metricsCostRow, metricsEarly } from "./metrics_cost.ts";
import { tlogCostRows, tlogEarly } from "./tlog_cost.ts";
import { workersEarly, workersRows } from "./workers.ts";
import { type HeldRss, measureHeld } from "./held_rss.ts";
import { type FreshTrio, peerFreshRows, startTrio, stopTrio, trioEarly } from "./peer_fresh.ts";
import { numFlag } from "./standalone.ts";
import { peerTarget, startPeer } from "./peer.ts";
import { issue19Rows } from "./targets.ts";
import { issue27Rows } from "./targets27.ts";
import { TAIL_WINDOW_S, tailRows } from "./tail_window.ts";
import { measureE2ee } from "./e2ee.ts";
import { measureVerifyingClient, verifyingEarly } from "./verifying_client.ts";
import { benchPlan, loadSeconds, startupSeconds } from "./plan.ts";
import { receiptVerdict } from "./receipt_check.ts";
import { PROMPT_LIMITS, promptSizeRows } from "./prompt_size.ts";

const CONCURRENCY = 32;
const HIGH_CONCURRENCY = 128;
const RATE = 500;

/**
 * Held-stream measurements per path, each on servers started fresh for it: one
 * sample of a quantity that drifts ±7 KB per stream between runs decided the
 * verdict by chance; the median of three is reported, with every sample.
 */

const STREAM_CONCURRENCY = 16;
const SERVER_CPU = 0;
const LOAD_CPU = 1;

/** Kernel thread names of a Deno process, as found on this runtime. */
const THREAD_LABELS: Record<string, string> = {
  "main (JS)": "JS main thread",
  "sw": "KV SQLite worker",
  "V8 DefaultWorke": "V8 helpers (GC, compiler)",
  "tokio-runtime-w": "tokio workers",
};

type PathName = "direct" | "bare" | "floor" | "gateway" | "verified" | "peer";
const PATHS: PathName[] = ["direct", "bare", "floor", "gateway", "verified", "peer"];
/** Paths served by the gateway under test (whose receipts are counted). */
const isGateway = (p: PathName) => p === "gateway" || p === "verified";

const started = performance.now();
const log = (msg: string) =>
  console.error(`[bench +${((performance.now() - started) / 1000).toFixed(0)} s] ${msg}`);
const MB = 1024 * 1024;

interface RoundStats {
  rps: number[];
  rpsHigh: number[];
  /** Server CPU (all threads) per request at c=32, µs; and its share of one core. */
  cpuPerReq: number[];
  cpuShare: number[];
  /** One request at a time: p50 latency (ms) and server CPU per request (µs). */
  singleP50: number[];
  singleCpu: number[];
  openP50: number[];
  openP99: number[];
  delayP50: number[];
  firstToken: number[];
  gapP50: number[];
  gapP99: number[];
  serverTiming: number[];
  /** Verified path: TLS handshakes the upstream accepted per request at c=32 (steady state). */
  handshakes: number[];
  /** …and over the other loads (c=1, c=128 beyond the 64-idle pool cap, open loop, streams). */
  handshakesAll: number[];
}
const emptyStats = (): RoundStats => ({
  rps: [],
  rpsHigh: [],
  cpuPerReq: [],
  cpuShare: [],
  singleP50: [],
  singleCpu: [],
  openP50: [],
  openP99: [],
  delayP50: [],
  firstToken: [],
  gapP50: [],
  gapP99: [],
  serverTiming: [],
  handshakes: [],
  handshakesAll: [],
});

async function preflight(): Promise<void> {
  try {
    await new Deno.Command("taskset", { args: ["-V"], stdout: "null", stderr: "null" }).output();
  } catch {
    throw new Error("taskset not found (install util-linux)");
  }
  if (navigator.hardwareConcurrency < 2) {
    throw new Error("needs at least 2 cores to pin server and load apart");
  }
}

type HeldPath = "bare" | "gateway" | "verified";

async function fsType(dir: string): Promise<string> {
  const out = await new Deno.Command("stat", { args: ["-f", "-c", "%T", dir], stdout: "piped" })
    .output();
  return new TextDecoder().decode(out.stdout).trim();
}

async function main(): Promise<void> {
  const plan = benchPlan((f) => Deno.args.includes(f), numFlag);
  // Quick figures are too noisy to replace the recorded ones.
  const write = Deno.args.includes("--write") && !plan.quick;
  const { rounds, seconds, profile } = plan;
  const HELD_STREAMS = plan.heldStreams;
  const HELD_SAMPLES = plan.heldSamples;
  // Shared servers start together, each on every core until it listens (bench/plan.ts).
  const together = plan.shareServers;
  startOnEveryCore(together);
  if (plan.quick) {
    log(
      `quick plan: about ${Math.round(loadSeconds(plan))} s of load, ` +
        `${Math.round(startupSeconds(plan))} s of start-ups`,
    );
  }
  await preflight();
  const host = await machine();
  const loadavg = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" "); // before pinning: nproc counts this process's allowed cores
  await pinSelf(LOAD_CPU);
  const dir = await Deno.makeTempDir({ prefix: "gateway-bench-" });
  // A reference row (not a verdict): fewer sequential commits in --quick.
  const kvCommit = await kvCommitLatency(dir, plan.quick ? 100 : 300);
  const servers: Server[] = [];
  let tlsClientClose: (() => void) | undefined;
  // --quick: later sections' servers start during the held streams, frozen until their rows.
  const early = together ? new EarlyStarts() : undefined;
  let gatewayOk = 0;
  const countGw = (name: PathName, r: LoadResult) => {
    if (isGateway(name)) gatewayOk += r.ok;
    return r;
  };
  try {
    // The verified confidential path: the same mock behind TLS with a dev attestation,
    // verified into a session by the gateway and reached over SPKI-pinned TLS.
    const [mock, tlsMock] = await startAll(together, [
      () =>
        spawnPinned(LOAD_CPU, ["run", "-A", "bench/mock_upstream.ts"], /mock listening on (\S+)/),
      () =>
        spawnPinned(
          LOAD_CPU,
          ["run", "-A", "bench/mock_upstream_tls.ts", `${dir}/tee.json`],
          /mock-tls listening on (\S+)/,
        ),
    ]);
    servers.push(mock, tlsMock);
    const tee = JSON.parse(await Deno.readTextFile(`${dir}/tee.json`));
    const spawnBare = () =>
      spawnPinned(
        SERVER_CPU,
        ["run", "-A", "bench/bare_proxy.ts", mock.url],
        /proxy listening on (\S+)/,
      );
    const verifiedUpstream = { url: tlsMock.url, caPem: tee.caPem, spkiSha256: tee.spkiSha256 };
    /** A fresh gateway for the verified path's held streams (its own store). */
    const startHeldVerified = async (i: number) => {
      const sub = `${dir}/held-verified-${i}`;
      await Deno.mkdir(sub);
      return startGateway(sub, mock.url, SERVER_CPU, [], verifiedUpstream);
    };
    // In --quick the first verified held-stream gateway starts with the main servers.
    const [bare, floor, gw, peer, ...heldVerified0] = await startAll(together, [
      spawnBare,
      () =>
        spawnPinned(
          SERVER_CPU,
          ["run", "-A", "bench/receipt_floor.ts", mock.url, `${dir}/floor.kv`],
          /floor listening on (\S+)/,
        ),
      (): Promise<GatewayUnderTest> =>
        startGateway(dir, mock.url, SERVER_CPU, [], verifiedUpstream),
      () => startPeer(SERVER_CPU),
      ...(together ? [() => startHeldVerified(0)] : []),
    ]);
    servers.push(bare, floor, gw, peer, ...heldVerified0);
    const tlsClient = Deno.createHttpClient({ caCerts: [tee.caPem] });
    tlsClientClose = () => tlsClient.close();
    /** TLS connections (= full handshakes) the confidential mock has accepted so far. */
    const tlsConnections = async () => {
      const r = await fetch(`${tlsMock.url}/stats`, { client: tlsClient });
      return ((await r.json()) as { connections: number }).connections - 1; // this probe's own
    };
    log(
      `mock ${mock.url}, bare proxy ${bare.url}, receipt floor ${floor.url}, gateway ${gw.url}; ` +
        `stores on ${await fsType(dir)}`,
    );

    // Every answer of the gateway under test names its receipt; each is looked up in its store.
    const sink = receiptSink();
    const targets: Record<PathName, Target> = {
      direct: { base: mock.url, headers: {}, model: (m) => m },
      bare: { base: bare.url, headers: {}, model: (m) => m },
      floor: { base: floor.url, headers: {}, model: (m) => m },
      gateway: {
        base: gw.url,
        headers: { authorization: `Bearer ${gw.key}` },
        model: gatewayModel,
        receipts: sink,
      },
      verified: {
        base: gw.url,
        headers: { authorization: `Bearer ${gw.key}` },
        model: verifiedModel,
        receipts: sink,
      },
      peer: peerTarget(peer, mock.url),
    };
    const pid: Record<Exclude<PathName, "direct">, number> = {
      bare: bare.pid,
      floor: floor.pid,
      gateway: gw.pid,
      verified: gw.pid,
      peer: peer.pid,
    };
    const rssStart = rssBytes(gw.pid);

    // Each later section's options, here so --quick can start their servers ahead.
    const section = (name: string) => ({
      dir: `${dir}/${name}`,
      mockUrl: mock.url,
      serverCpu: SERVER_CPU,
      concurrentStarts: together,
      early,
      log,
    });
    const metricsOpts = { ...section("metrics"), ...plan.metrics };
    const tlogOpts = { ...section("tlog"), ...plan.tlog };
    const workersOpts = { ...section("workers"), ...plan.workers };
    const trioOpts = { ...section("peer-fresh"), rounds, seconds };
    const verifyingOpts = { dir, gatewayUrl: gw.url, cpu: SERVER_CPU };
    if (early) {
      verifyingEarly(verifyingOpts, early);
      metricsEarly(metricsOpts, early);
      tlogEarly(tlogOpts, early);
      workersEarly(workersOpts, early);
      trioEarly(trioOpts, early, PROMPT_LIMITS);
      log("later sections' servers starting during the held streams (RSS, not time, measured)");
    }

    log(`${HELD_STREAMS} held streams, ${HELD_SAMPLES} samples (fresh servers each)`);
    const waits = plan.heldWaits;
    const held: Record<HeldPath, HeldRss[]> = {
      bare: [await measureHeld(targets.bare, bare.pid, mock.url, HELD_STREAMS, undefined, waits)],
      gateway: [
        await measureHeld(targets.gateway, gw.pid, mock.url, HELD_STREAMS, undefined, waits),
      ],
      verified: [],
    };
    gatewayOk += 50 + HELD_STREAMS;
    // Further samples on servers of their own (the gateway on its own store, so the
    // receipt count below stays that of the measured gateway).
    for (let i = 1; i < HELD_SAMPLES; i++) {
      const b = await spawnBare();
      try {
        held.bare.push(
          await measureHeld(
            { ...targets.bare, base: b.url },
            b.pid,
            mock.url,
            HELD_STREAMS,
            undefined,
            waits,
          ),
        );
      } finally {
        await b.stop();
      }
      const sub = `${dir}/held-${i}`;
      await Deno.mkdir(sub);
      const g = await startGateway(sub, mock.url, SERVER_CPU);
      try {
        const t = {
          ...targets.gateway,
          base: g.url,
          headers: { authorization: `Bearer ${g.key}` },
          receipts: undefined, // another store
        };
        held.gateway.push(await measureHeld(t, g.pid, mock.url, HELD_STREAMS, undefined, waits));
      } finally {
        await g.stop();
      }
    }
    // The verified path: every sample on a fresh gateway (pinned TLS connections, one per
    // held stream, to the confidential mock).
    for (let i = 0; i < HELD_SAMPLES; i++) {
      const early = i === 0 ? heldVerified0[0] : undefined;
      const g = early ?? await startHeldVerified(i);
      try {
        const t = {
          ...targets.verified,
          base: g.url,
          headers: { authorization: `Bearer ${g.key}` },
          receipts: undefined, // another store
        };
        held.verified.push(
          await measureHeld(t, g.pid, tlsMock.url, HELD_STREAMS, tlsClient, waits),
        );
      } finally {
        await g.stop();
        if (early) servers.splice(servers.indexOf(early), 1);
      }
    }

    if (early) {
      await early.ready();
      log("later sections' servers started, frozen until their rows");
    }

    const stats: Record<PathName, RoundStats> = {
      direct: emptyStats(),
      bare: emptyStats(),
      floor: emptyStats(),
      gateway: emptyStats(),
      verified: emptyStats(),
      peer: emptyStats(),
    };
    const rssRounds: number[] = [];
    // Gateway CPU by thread over all c=32 runs, to split the per-request cost.
    const threadMs = new Map<string, number>();
    let threadReqs = 0;
    let errors = 0;
    /** One path's loads of one round; `into` null runs them unrecorded (the warm-up). */
    const runPath = async (p: PathName, into: RoundStats | null) => {
      const t = targets[p];
      const s = into ?? emptyStats();
      // --quick has no warm-up round: a short unrecorded load first, so loads of a fraction of
      // a second do not measure a fresh process's JIT (the verified path's follows, below).
      if (!plan.warmupRound && p !== "verified") {
        countGw(p, await closedLoop(t, { concurrency: CONCURRENCY, seconds: plan.warmSeconds }));
      }
      const cpu0 = p === "direct" ? 0 : cpuMs(pid[p]);
      const threads0 = p === "gateway" && into ? threadCpuMs(gw.pid) : null;
      // Verified path, steady state: the pinned pool filled by a short unrecorded load at the
      // same concurrency (connections idle past 4 s were closed while other paths ran), then
      // the TLS connections the upstream accepts during the measured c=32 load are counted.
      if (p === "verified") {
        countGw(p, await closedLoop(t, { concurrency: CONCURRENCY, seconds: plan.warmSeconds }));
      }
      const handshakes0 = p === "verified" ? await tlsConnections() : 0;
      const closed = countGw(p, await closedLoop(t, { concurrency: CONCURRENCY, seconds }));
      if (p === "verified") s.handshakes.push((await tlsConnections() - handshakes0) / closed.ok);
      const handshakesAll0 = p === "verified" ? await tlsConnections() : 0;
      s.rps.push(closed.ok / closed.seconds);
      if (p !== "direct") {
        const used = cpuMs(pid[p]) - cpu0;
        s.cpuPerReq.push((used * 1000) / closed.ok);
        s.cpuShare.push(used / (closed.seconds * 1000));
      }
      if (threads0) {
        for (const [name, v] of threadCpuMs(gw.pid)) {
          threadMs.set(name, (threadMs.get(name) ?? 0) + v - (threads0.get(name) ?? 0));
        }
        threadReqs += closed.ok;
      }
      const cpu1 = p === "direct" ? 0 : cpuMs(pid[p]);
      const single = countGw(p, await closedLoop(t, { concurrency: 1, seconds }));
      s.singleP50.push(median(single.latencies));
      if (p !== "direct") s.singleCpu.push(((cpuMs(pid[p]) - cpu1) * 1000) / single.ok);
      const high = countGw(p, await closedLoop(t, { concurrency: HIGH_CONCURRENCY, seconds }));
      s.rpsHigh.push(high.ok / high.seconds);
      const open = countGw(p, await openLoop(t, { rate: RATE, seconds }));
      s.openP50.push(median(open.latencies));
      s.openP99.push(percentile(open.latencies, 99));
      if (open.serverTimings.length) s.serverTiming.push(median(open.serverTimings));
      const delayed = countGw(
        p,
        await openLoop(t, { rate: RATE, seconds, upstreamModel: "delay" }),
      );
      s.delayP50.push(median(delayed.latencies));
      const streams = await streamLoop(t, { concurrency: STREAM_CONCURRENCY, seconds });
      if (isGateway(p)) gatewayOk += streams.length;
      if (p === "verified") {
        const requests = single.ok + high.ok + open.ok + delayed.ok + streams.length;
        s.handshakesAll.push((await tlsConnections() - handshakesAll0) / requests);
      }
      s.firstToken.push(median(streams.map((x) => x.firstToken)));
      const gaps = streams.flatMap((x) => x.gaps);
      s.gapP50.push(median(gaps));
      s.gapP99.push(percentile(gaps, 99));
      const failed = closed.errors + single.errors + high.errors + open.errors + delayed.errors;
      if (!into && failed > 0) throw new Error(`${p}: ${failed} errors during warm-up`);
      if (into) errors += failed;
      if (p === "gateway" && into) rssRounds.push(rssBytes(gw.pid));
    };

    // A whole unrecorded round first: V8 grows each server's heap over its
    // first rounds of these loads (a 12-round run of the gateway levels off
    // after its fourth; bench/RESULTS.md), so the growth check would otherwise
    // compare rounds still on that ramp rather than look for a leak.
    if (plan.warmupRound) {
      log("warm-up: one unrecorded round");
      for (const p of PATHS) await runPath(p, null);
    }
    const rssAfterWarmup = rssBytes(gw.pid);

    for (let round = 0; round < rounds; round++) {
      // Rotate the order so no path always runs first (or right after another).
      const order = PATHS.map((_, i) => PATHS[(i + round) % PATHS.length]);
      log(`round ${round + 1}/${rounds}: ${order.join(", ")}`);
      for (const p of order) await runPath(p, stats[p]);
    }

    log(`tail: open loop at ${RATE} req/s in windows of ${TAIL_WINDOW_S} s, alternating`);
    const tail = await tailRows({
      targets: { direct: targets.direct, floor: targets.floor, gateway: targets.gateway },
      pids: { floor: floor.pid, gateway: gw.pid },
      rate: RATE,
      rounds: plan.tail.rounds,
      referenceSeconds: plan.tail.referenceSeconds,
      log,
    });
    gatewayOk += tail.ok;

    log("E2EE v2 vs plain chat (c=1, alternating batches)");
    const e2ee = await measureE2ee(targets.gateway, gw.pid, dir, seconds);
    gatewayOk += e2ee.ok;

    log("verifying client and proxy vs plain (c=1, alternating batches, same gateway)");
    const verifying = await measureVerifyingClient({
      ...verifyingOpts,
      gatewayPid: gw.pid,
      key: gw.key,
      ...plan.verifying,
      concurrentStarts: together,
      early,
      log,
    });

    gatewayOk += verifying.ok;

    await gw.stop();
    servers.splice(servers.indexOf(gw), 1);
    const stored = await storedReceiptIds(gw.storePath);
    const receipts = stored.size;
    // Each receipt an answer named, looked up: a 200 without its receipt stored is a defect.
    const missing = sink.ok.filter((id) => !stored.has(id)).length + sink.okWithout;
    const refusedWith = sink.refused.filter((id) => stored.has(id)).length;

    let profileText = "";
    if (profile) {
      log("profiling a separate gateway (non-streamed; c=1, then c=32)");
      profileText = await profileGateway(`${dir}/prof`, mock.url, SERVER_CPU, [
        { concurrency: 1, seconds: 3 },
        { concurrency: CONCURRENCY, seconds: 3 },
      ]);
    }

    const med = (p: PathName, k: keyof RoundStats) => median(stats[p][k]);
    const added = (p: PathName, k: keyof RoundStats) => med(p, k) - med("direct", k);
    const ratio = med("gateway", "rps") / med("bare", "rps");
    const floorRatio = med("floor", "rps") / med("bare", "rps");
    const perStreamSamples = (p: HeldPath) =>
      held[p].map((h) => (h.open - h.idle) / HELD_STREAMS / 1024);
    const perStream = (p: HeldPath) => median(perStreamSamples(p));
    /** The sample whose per-stream figure is the median (an odd count: a real sample). */
    const medianSample = (p: HeldPath): HeldRss => {
      const v = perStreamSamples(p);
      const order = v.map((_, i) => i).sort((a, b) => v[a] - v[b]);
      return held[p][order[Math.floor(order.length / 2)]];
    };
    const rssLine = (h: HeldRss) =>
      `${fmt(h.idle / MB, 1)} → ${fmt(h.open / MB, 1)} → ${fmt(h.after / MB, 1)}`;
    const samples = (p: HeldPath) =>
      `${fmt(perStream(p), 1)} (samples ${perStreamSamples(p).map((v) => fmt(v, 1)).join(", ")})`;
    // A plateau wobbles by tens of MB as V8 resizes its heap; a leak makes the
    // last round the highest. So: last round against the highest earlier one.
    const growth = rssRounds.length > 1
      ? (rssRounds[rssRounds.length - 1] - Math.max(...rssRounds.slice(0, -1))) / MB
      : NaN;
    const growthLimit = 0.05 * rssRounds[0] / MB;
    const ms = (v: number) => fmt(v, 3);

    const rows: Row[] = [
      {
        metric: `Throughput, non-streamed chat, closed loop c=${CONCURRENCY} (req/s)`,
        direct: fmt(med("direct", "rps"), 0),
        bare: fmt(med("bare", "rps"), 0),
        floor: fmt(med("floor", "rps"), 0),
        gateway: fmt(med("gateway", "rps"), 0),
      },
      {
        metric: `Throughput at c=${HIGH_CONCURRENCY} (req/s)`,
        direct: fmt(med("direct", "rpsHigh"), 0),
        bare: fmt(med("bare", "rpsHigh"), 0),
        floor: fmt(med("floor", "rpsHigh"), 0),
        gateway: fmt(med("gateway", "rpsHigh"), 0),
      },
      {
        metric: `Server CPU per request at c=${CONCURRENCY} (µs, all threads) / share of its core`,
        bare: `${fmt(med("bare", "cpuPerReq"), 0)} / ${fmt(100 * med("bare", "cpuShare"), 0)}%`,
        floor: `${fmt(med("floor", "cpuPerReq"), 0)} / ${fmt(100 * med("floor", "cpuShare"), 0)}%`,
        gateway: `${fmt(med("gateway", "cpuPerReq"), 0)} / ${
          fmt(100 * med("gateway", "cpuShare"), 0)
        }%`,
      },
      {
        metric: `Gateway CPU per request at c=${CONCURRENCY} by thread (µs)`,
        gateway: [...threadMs].filter(([, v]) => (v * 1000) / threadReqs >= 1)
          .sort((a, b) => b[1] - a[1])
          .map(([name, v]) => `${THREAD_LABELS[name] ?? name} ${fmt((v * 1000) / threadReqs, 0)}`)
          .join(", "),
      },
      {
        metric: "One request at a time (c=1): p50 latency (ms) / server CPU per request (µs)",
        direct: ms(med("direct", "singleP50")),
        bare: `${ms(med("bare", "singleP50"))} / ${fmt(med("bare", "singleCpu"), 0)}`,
        floor: `${ms(med("floor", "singleP50"))} / ${fmt(med("floor", "singleCpu"), 0)}`,
        gateway: `${ms(med("gateway", "singleP50"))} / ${fmt(med("gateway", "singleCpu"), 0)}`,
      },
      {
        metric: "Gateway throughput / bare proxy",
        gateway: `${fmt(100 * ratio, 1)}%`,
        target: "≥ 70%",
        verdict: atLeast(100 * ratio, 70, "points", 1),
      },
      {
        metric: "Receipt floor throughput / bare proxy (the price of the receipt rule alone)",
        floor: `${fmt(100 * floorRatio, 1)}%`,
      },
      {
        metric: "Gateway throughput / receipt floor (the gateway's own overhead)",
        gateway: `${fmt(100 * ratio / floorRatio, 1)}%`,
      },
      {
        metric: `p50 latency at ${RATE} req/s, small non-streamed chat (ms)`,
        direct: ms(med("direct", "openP50")),
        bare: ms(med("bare", "openP50")),
        floor: ms(med("floor", "openP50")),
        gateway: ms(med("gateway", "openP50")),
      },
      {
        metric: `Added p50 vs direct at ${RATE} req/s (ms)`,
        bare: ms(added("bare", "openP50")),
        floor: ms(added("floor", "openP50")),
        gateway: ms(added("gateway", "openP50")),
        target: "≤ 0.5 ms",
        verdict: atMost(added("gateway", "openP50"), 0.5, "ms", 3),
      },
      {
        metric: `Added p99 vs direct at ${RATE} req/s (ms)`,
        bare: ms(added("bare", "openP99")),
        floor: ms(added("floor", "openP99")),
        gateway: ms(added("gateway", "openP99")),
      },
      {
        metric:
          `Added p50 vs direct at ${RATE} req/s, upstream answering after ${DELAY_MS} ms (ms)`,
        bare: ms(added("bare", "delayP50")),
        floor: ms(added("floor", "delayP50")),
        gateway: ms(added("gateway", "delayP50")),
      },
      {
        metric:
          `Gateway's own Server-Timing gw;dur p50 at ${RATE} req/s (ms, includes the upstream hop)`,
        gateway: ms(med("gateway", "serverTiming")),
      },
      {
        metric:
          `Streaming first-token delay, ${STREAM_CONCURRENCY} concurrent streams of ${STREAM_CHUNKS} chunks (ms)`,
        direct: ms(med("direct", "firstToken")),
        bare: ms(med("bare", "firstToken")),
        floor: ms(med("floor", "firstToken")),
        gateway: ms(med("gateway", "firstToken")),
      },
      {
        metric: "Added first-token delay vs direct (ms)",
        bare: ms(added("bare", "firstToken")),
        floor: ms(added("floor", "firstToken")),
        gateway: ms(added("gateway", "firstToken")),
        target: "≤ 1 ms",
        verdict: atMost(added("gateway", "firstToken"), 1, "ms", 3),
      },
      {
        metric: `Added inter-chunk gap vs direct, p50 / p99 (ms; upstream gap ${CHUNK_GAP_MS} ms)`,
        bare: `${ms(added("bare", "gapP50"))} / ${ms(added("bare", "gapP99"))}`,
        floor: `${ms(added("floor", "gapP50"))} / ${ms(added("floor", "gapP99"))}`,
        gateway: `${ms(added("gateway", "gapP50"))} / ${ms(added("gateway", "gapP99"))}`,
      },
      {
        metric: `RSS of a fresh server: idle → ${HELD_STREAMS} open streams → ${
          waits.afterMs / 1000
        } s after they close (MB; the median sample)`,
        bare: rssLine(medianSample("bare")),
        gateway: rssLine(medianSample("gateway")),
        verified: rssLine(medianSample("verified")),
      },
      {
        metric: `RSS per open stream (KB; median of ${HELD_SAMPLES} fresh servers)`,
        bare: samples("bare"),
        gateway: samples("gateway"),
        verified: samples("verified"),
        target: "≤ 100 KB (both paths)",
        verdict: `plain: ${atMost(perStream("gateway"), 100, "KB", 1)}; verified: ${
          atMost(perStream("verified"), 100, "KB", 1)
        }`,
      },
      {
        metric:
          `Gateway RSS: after start; after the warm-up round; after each of ${rounds} rounds (MB)`,
        gateway: `${fmt(rssStart / MB, 1)}; ${fmt(rssAfterWarmup / MB, 1)}; ${
          rssRounds.map((r) => fmt(r / MB, 1)).join(", ")
        }`,
        target: `no growth: last round ≤ highest earlier + 5% (${fmt(growthLimit, 1)} MB)`,
        verdict: atMost(growth, growthLimit, "MB", 1),
      },
      {
        metric: "Reference: one durable KV commit on this disk (1 set, sequential), p50 / p99 (ms)",
        gateway: `${ms(kvCommit.p50)} / ${ms(kvCommit.p99)}`,
      },
      {
        metric: "Receipts durably committed per second (= gateway req/s at c=32)",
        gateway: fmt(med("gateway", "rps"), 0),
      },
      {
        metric: "Receipts in the KV file / successful gateway responses (every client of the " +
          "run counted: loads, held streams, E2EE, verifying client); refusals with a receipt",
        gateway: `${receipts} / ${gatewayOk}; ${refusedWith}`,
        verdict: receiptVerdict(receipts, gatewayOk + refusedWith, missing, sink.ok.length),
      },
    ];
    rows.push(...issue19Rows(stats, RATE, STREAM_CONCURRENCY));
    rows.push(...issue27Rows(stats, { rate: RATE, streams: STREAM_CONCURRENCY, seconds }));
    rows.push(...tail.rows);
    rows.push(...e2ee.rows);
    rows.push(...verifying.rows);
    if (errors > 0) {
      rows.push({ metric: "Non-200 answers during measured rounds", gateway: String(errors) });
    }
    // Metrics on vs off, on two fresh gateways (bench/metrics_cost.ts); gw is stopped by now.
    rows.push(
      // A 2% effect needs more samples than the other rows: a full run takes 16 paired rounds of 3 s on 8 fresh pairs of gateways (bench/metrics_cost.ts: an A/A run of 8 rounds gave 0.09%, rounds −7.3 to +2.2%).
      await metricsCostRow(metricsOpts),
    );

    // The transparency log on vs off, and release → inclusion delay (bench/tlog_cost.ts).
    rows.push(
      ...await tlogCostRows(tlogOpts),
    );

    // #27 every core: 2 workers on one core vs 1, and 1/2/4 workers where there are cores.
    rows.push(
      ...await workersRows(workersOpts),
    );

    // The peer ratio on fresh processes, c=32 only (bench/peer_fresh.ts). In --quick the
    // prompt-size rows then run on the same three servers rather than three more.
    const trio: FreshTrio | undefined = together
      ? await startTrio(trioOpts, PROMPT_LIMITS)
      : undefined;
    try {
      rows.push(
        ...await peerFreshRows({
          dir: `${dir}/peer-fresh`,
          mockUrl: mock.url,
          serverCpu: SERVER_CPU,
          rounds: plan.peer.rounds,
          seconds: plan.peer.seconds,
          warmSeconds: plan.peer.warmSeconds,
          trio,
          log,
        }),
      );

      // Cost per prompt byte (#27): fresh floor, gateway and Portkey (--quick: the trio above).
      log(
        `prompt sizes 1 KB – 1 MB (${trio ? "the fresh-peer row's servers" : "fresh processes"})`,
      );
      rows.push(
        ...await promptSizeRows({
          ...plan.promptSizes,
          dir: `${dir}/prompt-size`,
          mockUrl: mock.url,
          serverCpu: SERVER_CPU,
          trio,
          log,
        }),
      );
    } finally {
      if (trio) await stopTrio(trio);
    }

    const header = [
      `Run ${new Date().toISOString()}: \`deno task bench${
        plan.quick ? " --quick" : ""
      }\` with ${rounds} rounds of ${seconds} s per ` +
      `measurement, paths alternating; medians of round medians.`,
      "",
      `Machine: ${host}; load average at start ${loadavg}. Server under test pinned to core ${SERVER_CPU}; ` +
      `load generator (raw HTTP/1.1 keep-alive client; fetch for streams) and mock upstream on core ${LOAD_CPU}.`,
    ].join("\n");
    const table = renderTable(rows);
    const out = [header, "", table, "", profileText].join("\n").trimEnd() + "\n";
    console.log(out);
    if (write) {
      await writeResults(`${ROOT}bench/RESULTS.md`, out);
      log("bench/RESULTS.md updated");
    }
  } finally {
    tlsClientClose?.();
    await early?.stopAll();
    // Nothing is measured any more: --quick stops them together.
    if (together) await Promise.all(servers.map((s) => s.stop()));
    else for (const s of servers.reverse()) await s.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  // Since this process started (#27: a quick run must finish within a minute).
  console.log(`${plan.quick ? "quick " : ""}run took ${(performance.now() / 1000).toFixed(0)} s`);
}

if (import.meta.main) await main();
