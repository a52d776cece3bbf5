/**
 * Cost per prompt byte (#27): non-streamed chat with prompts of 1 KB, 32 KB,
 * 256 KB and 1 MB through the receipt floor, the gateway and Portkey, fresh
 * processes, paths alternating in every round. Per size: throughput (closed
 * loop, c=32 up to 32 KB, 16 at 256 KB, 8 at 1 MB),
 * server CPU per request (all threads, from /proc), and one request at a time
 * (p50 added over the mock directly). Verdicts: gateway CPU per request ≤ 1.5×
 * the floor's, throughput ≥ 3× Portkey's.
 *
 * The prompt is source code (this repository's `src/`, concatenated and
 * repeated): what coding agents send, neither one repeated word (which the
 * tokenizer's memo makes cheap) nor random bytes (which nobody sends).
 *
 * Round counts come from a plan like bench/plan.ts's (`PromptSizePlan`), so
 * `task bench --quick` can pass fewer: `rounds`, `seconds`, `warmSeconds`.
 *
 *   deno run -A bench/prompt_size.ts [--rounds N] [--seconds S] [--sizes 1,32,256,1024]
 */
import { encodeRequest, HttpConn } from "./http_conn.ts";
import { AGENT_MODEL, LONG_MODEL } from "./gateway_setup.ts";
import { measureAgentTurns } from "./agent_turns.ts";
import { cpuMs, type Server } from "./processes.ts";
import { promptText } from "./prompt_text.ts";
import { peerTarget } from "./peer.ts";
import { type FreshTrio, startTrio, stopTrio } from "./peer_fresh.ts";
import { median } from "./stats.ts";
import { atLeast, atMost, fmt, type Row } from "./report.ts";
import { type MeasureOptions, numFlag, runStandalone } from "./standalone.ts";

/** Prompt sizes of the rows, KiB of request body. */
export const PROMPT_KIB = [1, 32, 256, 1024];
/**
 * Closed-loop concurrency per size: enough to saturate the server's core (at c=4
 * a 1 KB request mostly waits for its commit, so req/s measured latency, not
 * capacity), with at most 8 MB of bodies in flight (the budgets are raised below).
 */
export const concurrencyFor = (kib: number): number => kib <= 32 ? 32 : kib <= 256 ? 16 : 8;
export const CPU_TARGET = 1.5;
export const PEER_TARGET = 3;

/** What bench/plan.ts would give this measurement (full: 3 × 3 s; quick: 1 × 0.5 s). */
export interface PromptSizePlan {
  rounds: number;
  seconds: number;
  /** Unrecorded load per path and size before the measured rounds. */
  warmSeconds: number;
  sizesKiB?: number[];
  /** Rounds and measured turns per round of the coding agent's conversation (bench/agent_turns.ts). */
  agentRounds: number;
  agentTurns: number;
  /** Unmeasured turns first (bench/agent_turns.ts). */
  agentWarmTurns: number;
}

/**
 * The rows' plan: full (3 rounds of 3 s, 2 s warm-up per path and size: about
 * 4 minutes) or quick (1 round of 0.5 s: about 25 s with process start-up).
 * bench/plan.ts's `BenchPlan` can carry one as `promptSizes`.
 */
export function promptSizePlan(quick: boolean): PromptSizePlan {
  return quick
    ? {
      rounds: 1,
      seconds: 0.5,
      warmSeconds: 0.3,
      agentRounds: 1,
      agentTurns: 4,
      agentWarmTurns: 2,
    }
    : { rounds: 3, seconds: 3, warmSeconds: 2, agentRounds: 3, agentTurns: 16, agentWarmTurns: 16 };
}

const CHAT_PATH = "/v1/chat/completions";

/** A chat body of about `kib` KiB (JSON escapes included). */
export function promptBody(model: string, kib: number): string {
  const target = kib * 1024;
  const make = (chars: number) =>
    JSON.stringify({
      model,
      messages: [
        { role: "system", content: "You are a careful code reviewer." },
        { role: "user", content: promptText(chars) },
      ],
      max_tokens: 16,
    });
  // Escapes make the body longer than the text: shrink the text once to fit.
  const first = make(target);
  return make(Math.max(16, Math.floor(target * target / first.length) - 200));
}

interface PathRun {
  name: "direct" | "floor" | "gateway" | "peer";
  server?: Server;
  base: string;
  headers: Record<string, string>;
  model: string;
}

/** `concurrency` keep-alive connections sending the encoded `req` back to back for `seconds`. */
export async function rawClosedLoop(
  req: Uint8Array,
  base: string,
  concurrency: number,
  seconds: number,
): Promise<{ ok: number; errors: number; seconds: number; latencies: number[] }> {
  const url = new URL(base);
  const conns = await Promise.all(Array.from({ length: concurrency }, () => HttpConn.open(url)));
  const r = { ok: 0, errors: 0, seconds: 0, latencies: [] as number[] };
  const start = performance.now();
  const deadline = start + seconds * 1000;
  await Promise.all(conns.map(async (c) => {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      const res = await c.request(req);
      if (res.status !== 200) {
        r.errors++;
        continue;
      }
      r.ok++;
      r.latencies.push(performance.now() - t0);
    }
  }));
  r.seconds = (performance.now() - start) / 1000;
  for (const c of conns) c.close();
  return r;
}

/** 1 MB bodies × c=8 are past the default budgets of bytes in flight (4 MB per key). */
export const PROMPT_LIMITS = {
  body_bytes_in_flight_per_key: 64 * 1024 * 1024,
  body_bytes_in_flight: 64 * 1024 * 1024,
};

/**
 * `trio`: `--quick` passes the fresh-peer row's servers (started with PROMPT_LIMITS) rather
 * than three more start-ups; the rows say so.
 */
export async function promptSizeRows(
  o: MeasureOptions & {
    warmSeconds: number;
    sizesKiB?: number[];
    trio?: FreshTrio;
    agentRounds: number;
    agentTurns: number;
    agentWarmTurns: number;
  },
): Promise<Row[]> {
  const sizes = o.sizesKiB ?? PROMPT_KIB;
  const own = o.trio ? undefined : await startTrio(o, PROMPT_LIMITS);
  const { gw, floor, peer } = o.trio ?? own!;
  const shared = o.trio ? " (quick: the fresh-peer row's servers)" : "";
  try {
    const pt = peerTarget(peer, o.mockUrl);
    const paths: PathRun[] = [
      { name: "direct", base: o.mockUrl, headers: {}, model: "chat" },
      { name: "floor", server: floor, base: floor.url, headers: {}, model: "chat" },
      {
        name: "gateway",
        server: gw,
        base: gw.url,
        headers: { authorization: `Bearer ${gw.key}` },
        model: LONG_MODEL,
      },
      { name: "peer", server: peer, base: peer.url, headers: pt.headers, model: "chat" },
    ];
    const reqs = new Map<string, Uint8Array>();
    const reqFor = (p: PathRun, kib: number) => {
      const k = `${p.name}/${kib}`;
      let r = reqs.get(k);
      if (!r) {
        r = encodeRequest(new URL(CHAT_PATH, p.base), {
          headers: { "content-type": "application/json", ...p.headers },
          body: promptBody(p.model, kib),
        });
        reqs.set(k, r);
      }
      return r;
    };
    type Key = `${string}/${number}`;
    const rps = new Map<Key, number[]>();
    const cpu = new Map<Key, number[]>();
    const p50 = new Map<Key, number[]>();
    const push = (m: Map<Key, number[]>, k: Key, v: number) => {
      const a = m.get(k) ?? [];
      a.push(v);
      m.set(k, a);
    };
    // 0 in --quick: the shared trio is warm from the fresh-peer row (the whole warm-up of a
    // 1 MB size is a request per connection, ~0.5 s each path, whatever `warmSeconds` says).
    for (const kib of o.warmSeconds > 0 ? sizes : []) {
      for (const p of paths) {
        const w = await rawClosedLoop(reqFor(p, kib), p.base, concurrencyFor(kib), o.warmSeconds);
        if (w.ok === 0) throw new Error(`${p.name} at ${kib} KiB: no 200 during warm-up`);
      }
    }
    for (let r = 0; r < o.rounds; r++) {
      for (const kib of sizes) {
        const order = paths.map((_, i) => paths[(i + r) % paths.length]);
        for (const p of order) {
          const req = reqFor(p, kib);
          const k: Key = `${p.name}/${kib}`;
          const c0 = p.server ? cpuMs(p.server.pid) : 0;
          const res = await rawClosedLoop(req, p.base, concurrencyFor(kib), o.seconds);
          push(rps, k, res.ok / res.seconds);
          if (p.server) push(cpu, k, ((cpuMs(p.server.pid) - c0) * 1000) / Math.max(1, res.ok));
          const one = await rawClosedLoop(req, p.base, 1, o.seconds / 2);
          push(p50, k, median(one.latencies));
          if (res.errors + one.errors > 0) o.log(`${k}: ${res.errors + one.errors} non-200`);
        }
        o.log(
          `prompt ${kib} KiB round ${r + 1}: ` +
            paths.filter((p) => p.server).map((p) =>
              `${p.name} ${fmt(rps.get(`${p.name}/${kib}`)!.at(-1)!, 0)} rps ${
                fmt(cpu.get(`${p.name}/${kib}`)!.at(-1)!, 0)
              } µs`
            ).join(", "),
        );
      }
    }
    const m = (map: Map<Key, number[]>, name: string, kib: number) =>
      median(map.get(`${name}/${kib}`) ?? []);
    const rows: Row[] = [];
    for (const kib of sizes) {
      const bodyKiB = fmt(reqFor(paths[2], kib).length / 1024, 0);
      const ratio = m(cpu, "gateway", kib) / m(cpu, "floor", kib);
      const peerRatio = m(rps, "gateway", kib) / m(rps, "peer", kib);
      const added = (n: string) => fmt(m(p50, n, kib) - m(p50, "direct", kib), 3);
      rows.push(
        {
          metric: `Prompt ${bodyKiB} KiB (code), c=${concurrencyFor(kib)}: req/s / server CPU ` +
            `per request (µs) / c=1 added p50 (ms)${shared}`,
          direct: `${fmt(m(rps, "direct", kib), 0)} / – / ${fmt(m(p50, "direct", kib), 3)} (abs)`,
          floor: `${fmt(m(rps, "floor", kib), 0)} / ${fmt(m(cpu, "floor", kib), 0)} / ${
            added("floor")
          }`,
          gateway: `${fmt(m(rps, "gateway", kib), 0)} / ${fmt(m(cpu, "gateway", kib), 0)} / ${
            added("gateway")
          }`,
          peer: `${fmt(m(rps, "peer", kib), 0)} / ${fmt(m(cpu, "peer", kib), 0)} / ${
            added("peer")
          }`,
        },
        {
          metric:
            `Prompt ${bodyKiB} KiB: gateway CPU per request ÷ floor's; throughput ÷ Portkey's`,
          gateway: `${fmt(ratio)}×; ${fmt(peerRatio)}×`,
          target: `≤ ${CPU_TARGET}×; ≥ ${PEER_TARGET}×`,
          verdict: `CPU: ${atMost(ratio, CPU_TARGET, "×")}; peer: ${
            atLeast(peerRatio, PEER_TARGET, "×")
          }`,
        },
      );
    }
    rows.push(
      ...await agentRows(paths, o.agentRounds, o.agentTurns, o.agentWarmTurns, shared, o.log),
    );
    return rows;
  } finally {
    if (own) await stopTrio(own);
  }
}

/**
 * The coding agent's turn (bench/agent_turns.ts): a ~100k-token conversation, one
 * turn longer each request, c=1, a 200k context: the prompt is counted, and only
 * what is new since the key's previous turn is tokenized.
 */
async function agentRows(
  paths: PathRun[],
  rounds: number,
  turns: number,
  warmTurns: number,
  shared: string,
  log: (s: string) => void,
): Promise<Row[]> {
  if (rounds * turns <= 0) return [];
  const r = await measureAgentTurns(
    paths.map((p) => ({
      name: p.name,
      pid: p.server?.pid,
      base: p.base,
      headers: p.headers,
      model: p.name === "gateway" ? AGENT_MODEL : p.model,
    })),
    rounds,
    turns,
    CHAT_PATH,
    warmTurns,
  );
  const cpu = (n: string) => r.cpu.get(n) ?? NaN;
  const added = (n: string) => fmt((r.p50.get(n) ?? NaN) - (r.p50.get("direct") ?? NaN), 3);
  const ratio = cpu("gateway") / cpu("floor");
  log(`coding agent: ${[...r.cpu].map(([n, v]) => `${n} ${fmt(v, 0)} µs`).join(", ")}`);
  return [
    {
      metric: `Coding agent: a ~100k-token conversation one turn longer per request (${rounds} ` +
        `round(s) of ${turns} turns from the same start after ${warmTurns} unmeasured, bodies ${
          fmt(r.kib[0], 0)
        }–${fmt(r.kib[1], 0)} KiB, a 200k-token context, so ` +
        `the gateway counts it), c=1: server CPU per request (µs) / added p50 (ms)${shared}`,
      direct: `– / ${fmt(r.p50.get("direct") ?? NaN, 3)} (abs)`,
      floor: `${fmt(cpu("floor"), 0)} / ${added("floor")}`,
      gateway: `${fmt(cpu("gateway"), 0)} / ${added("gateway")}`,
      peer: `${fmt(cpu("peer"), 0)} / ${added("peer")}`,
    },
    {
      metric: "Coding agent: gateway CPU per request ÷ floor's",
      gateway: `${fmt(ratio)}×`,
      target: `≤ ${CPU_TARGET}×`,
      verdict: atMost(ratio, CPU_TARGET, "×"),
    },
  ];
}

if (import.meta.main) {
  const i = Deno.args.indexOf("--sizes");
  const sizesKiB = i >= 0 ? Deno.args[i + 1].split(",").map(Number) : undefined;
  const plan = promptSizePlan(Deno.args.includes("--quick"));
  await runStandalone(
    "prompt-size",
    plan,
    (o) =>
      promptSizeRows({
        ...o,
        warmSeconds: numFlag("warm", plan.warmSeconds),
        sizesKiB,
        agentRounds: numFlag("agent-rounds", plan.agentRounds),
        agentTurns: numFlag("agent-turns", plan.agentTurns),
        agentWarmTurns: numFlag("agent-warm", plan.agentWarmTurns),
      }),
  );
}
