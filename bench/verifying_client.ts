/**
 * The bench's verifying-client rows: what verification in the transport adds
 * per request in steady state (attestation cached, connections kept alive),
 * against the plain path in the same run. One request at a time with the real
 * `openai` SDK, in alternating batches over six paths to the same gateway:
 * plain (the SDK's own fetch); the library (`verifyingFetch`: receipt fetch
 * and checks) with the inclusion verdict before the answer (the default:
 * the answer waits for the log's next checkpoint), deferred (checked after
 * the answer; the batch settles every deferred verdict outside the timing)
 * and off (and off with E2EE off too: what the receipt check alone costs,
 * E2EE being on by default when the gateway offers it); and the local proxy (`proxy.ts`, a separate process on the server
 * core) with inclusion before the answer and off. Standalone:
 * `deno run -A bench/verifying_client.ts [--rounds N] [--seconds S]`.
 */
import OpenAI from "openai";
import { verifyingFetch } from "../src/client/node.ts";
import { gatewayModel, startGateway } from "./gateway_setup.ts";
import {
  cpuMs,
  type EarlyStarts,
  type Server,
  spawnPinned,
  startAll,
  takeOr,
} from "./processes.ts";
import { fmt, type Row } from "./report.ts";
import { percentile } from "./stats.ts";
import { runStandalone } from "./standalone.ts";

const FULL_BATCH = 10;
type PathName =
  | "plain"
  | "library"
  | "library (inclusion deferred)"
  | "library (no inclusion)"
  | "library (no inclusion, no E2EE)"
  | "proxy"
  | "proxy (no inclusion)";

export interface VerifyingClientBench {
  gatewayUrl: string;
  /** The gateway process, for the CPU it spends per request (receipt and proof lookups). */
  gatewayPid: number;
  key: string;
  dir: string;
  cpu: number;
  rounds: number;
  /** Requests per batch (whole, then streamed) and unrecorded ones per path; `--quick` passes fewer. */
  batch?: number;
  warmups?: number;
  /** Start the two proxies together (`--quick`), or take them started ahead. */
  concurrentStarts?: boolean;
  early?: EarlyStarts;
  log: (msg: string) => void;
}

/** The local proxies measured: with the inclusion verdict before the answer, and off. */
const PROXIES: [string, Record<string, unknown>][] = [
  ["proxy", {}],
  ["proxy-nolog", { inclusion: "off" }],
];

async function startProxy(
  o: Pick<VerifyingClientBench, "dir" | "gatewayUrl" | "cpu">,
  name: string,
  policy: Record<string, unknown>,
) {
  const policyPath = `${o.dir}/${name}-policy.json`;
  await Deno.writeTextFile(policyPath, JSON.stringify({ allow_dev_evidence: true, ...policy }));
  return await spawnPinned(o.cpu, [
    "run",
    "-A",
    "proxy.ts",
    "--gateway",
    `${o.gatewayUrl}/v1`,
    "--listen",
    "127.0.0.1:0",
    "--policy",
    policyPath,
    "--audit",
    `${o.dir}/${name}-audit.jsonl`,
  ], /verifying proxy for \S+ on (http:\/\/[^/\s]+)\/v1/);
}

/** `--quick`: both proxies started ahead (bench/processes.ts EarlyStarts). */
export function verifyingEarly(
  o: Pick<VerifyingClientBench, "dir" | "gatewayUrl" | "cpu">,
  early: EarlyStarts,
): void {
  for (const [name, policy] of PROXIES) {
    early.start(`proxy/${name}`, () => startProxy(o, name, policy));
  }
}

/** A difference with its sign (noise can make an added cost negative). */
const signed = (d: number) => `${d < 0 ? "−" : "+"}${fmt(Math.abs(d))}`;

/** The rows, and how many requests were answered (each has a receipt in the gateway's store). */
export async function measureVerifyingClient(
  o: VerifyingClientBench,
): Promise<{ rows: Row[]; ok: number }> {
  let ok = 0;
  const BATCH = o.batch ?? FULL_BATCH;
  const [proxy, proxyNoLog] = await startAll(
    o.concurrentStarts ?? false,
    PROXIES.map(([name, policy]) => () =>
      takeOr(o.early, `proxy/${name}`, () => startProxy(o, name, policy))
    ) as [() => Promise<Server>, () => Promise<Server>],
  );
  const lib = (policy: Record<string, unknown>) =>
    verifyingFetch({
      baseURL: `${o.gatewayUrl}/v1`,
      policy: { allow_dev_evidence: true, ...policy },
    });
  const libs = {
    library: lib({}),
    "library (inclusion deferred)": lib({ inclusion_verdict: "deferred" }),
    "library (no inclusion)": lib({ inclusion: "off" }),
    "library (no inclusion, no E2EE)": lib({ inclusion: "off", e2ee: "off" }),
  };
  const client = (baseURL: string, f?: typeof fetch) =>
    new OpenAI({ baseURL, apiKey: o.key, maxRetries: 0, ...(f ? { fetch: f } : {}) });
  const clients: Record<PathName, OpenAI> = {
    plain: client(`${o.gatewayUrl}/v1`),
    library: client(`${o.gatewayUrl}/v1`, libs.library),
    "library (inclusion deferred)": client(
      `${o.gatewayUrl}/v1`,
      libs["library (inclusion deferred)"],
    ),
    "library (no inclusion)": client(`${o.gatewayUrl}/v1`, libs["library (no inclusion)"]),
    "library (no inclusion, no E2EE)": client(
      `${o.gatewayUrl}/v1`,
      libs["library (no inclusion, no E2EE)"],
    ),
    proxy: client(`${proxy.url}/v1`),
    "proxy (no inclusion)": client(`${proxyNoLog.url}/v1`),
  };
  // Every deferred verdict must arrive (and pass): settled after each batch, outside the timing.
  const settle = async () => {
    const late = await libs["library (inclusion deferred)"].settle();
    if (late.some((v) => !v.ok)) throw new Error("a deferred inclusion check failed");
  };
  const paths = Object.keys(clients) as PathName[];
  /** Per path: CPU ms of the client side (this process: SDK and library; plus the proxy) and gateway. */
  const cpu: Record<string, { client: number; gateway: number; n: number }> = {};
  const pidOf = (p: PathName) =>
    p === "proxy" ? proxy.pid : p === "proxy (no inclusion)" ? proxyNoLog.pid : null;
  const whole: Record<string, number[]> = {};
  const streamed: Record<string, number[]> = {};
  const body = {
    model: gatewayModel("chat"),
    messages: [{ role: "user" as const, content: "bench the verifying client" }],
  };
  const one = async (p: PathName, stream: boolean, into: Record<string, number[]> | null) => {
    const t0 = performance.now();
    if (stream) {
      for await (const _ of await clients[p].chat.completions.create({ ...body, stream: true })) {
        // read to the end: the verdict comes before the final event
      }
    } else await clients[p].chat.completions.create(body);
    ok++; // a failed request throws (and ends the run)
    (into ? (into[p] ??= []) : []).push(performance.now() - t0);
  };
  try {
    // attest, connect
    for (const p of paths) for (let i = 0; i < (o.warmups ?? 3); i++) await one(p, false, null);
    await settle();
    for (let round = 0; round < o.rounds; round++) {
      o.log(`verifying client round ${round + 1}/${o.rounds}`);
      const order = paths.map((_, i) => paths[(i + round) % paths.length]);
      for (const p of order) {
        const helper = pidOf(p);
        const c0 = cpuMs(Deno.pid) + (helper ? cpuMs(helper) : 0);
        const g0 = cpuMs(o.gatewayPid);
        for (let i = 0; i < BATCH; i++) await one(p, false, whole);
        for (let i = 0; i < BATCH; i++) await one(p, true, streamed);
        await settle();
        const acc = cpu[p] ??= { client: 0, gateway: 0, n: 0 };
        acc.client += cpuMs(Deno.pid) + (helper ? cpuMs(helper) : 0) - c0;
        acc.gateway += cpuMs(o.gatewayPid) - g0;
        acc.n += 2 * BATCH;
      }
    }
  } finally {
    for (const f of Object.values(libs)) f.close();
    await proxy.stop();
    await proxyNoLog.stop();
  }
  const cell = (samples: Record<string, number[]>, q: number) => {
    const base = percentile(samples.plain, q);
    return paths.map((p) => {
      const v = percentile(samples[p], q);
      return p === "plain" ? `plain ${fmt(v)}` : `${p} ${fmt(v)} (${signed(v - base)})`;
    }).join(" · ");
  };
  const n = o.rounds * BATCH;
  const perReq = (p: string, k: "client" | "gateway") => cpu[p][k] / cpu[p].n;
  const cpuCell = (k: "client" | "gateway") =>
    paths.map((p) => {
      const v = perReq(p, k);
      return p === "plain"
        ? `plain ${fmt(v)}`
        : `${p} ${fmt(v)} (${signed(v - perReq("plain", k))})`;
    }).join(" · ");
  const rows: Row[] = [
    {
      metric: `Verifying client: chat latency, median ms (c=1, ${n} per path)`,
      gateway: cell(whole, 50),
    },
    { metric: "Verifying client: chat latency, p95 ms", gateway: cell(whole, 95) },
    {
      metric: `Verifying client: streamed chat to its last event, median ms (${n} per path)`,
      gateway: cell(streamed, 50),
    },
    {
      metric:
        "Verifying client: client-side CPU per request, ms (the SDK process; the proxy's added)",
      gateway: cpuCell("client"),
    },
    {
      metric: "Verifying client: gateway CPU per request, ms (receipt and proof lookups)",
      gateway: cpuCell("gateway"),
    },
  ];
  return { rows, ok };
}

if (import.meta.main) {
  await runStandalone("verifying-client", { rounds: 3, seconds: 1 }, async (o) => {
    const gw = await startGateway(o.dir, o.mockUrl, o.serverCpu);
    try {
      return (await measureVerifyingClient({
        gatewayUrl: gw.url,
        gatewayPid: gw.pid,
        key: gw.key,
        dir: o.dir,
        cpu: o.serverCpu,
        rounds: o.rounds,
        log: o.log,
      })).rows;
    } finally {
      await gw.stop();
    }
  });
}
