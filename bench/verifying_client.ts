/**
 * The bench's verifying-client rows: what verification in the transport adds
 * per request in steady state (attestation cached, connections kept alive),
 * against the plain path in the same run. One request at a time with the real
 * `openai` SDK, in alternating batches over four paths to the same gateway:
 * plain (the SDK's own fetch), the library (`verifyingFetch`: receipt fetch
 * and checks, log inclusion), the library with inclusion off, and the local
 * proxy (`proxy.ts`, a separate process on the server core). Standalone:
 * `deno run -A bench/verifying_client.ts [--rounds N] [--seconds S]`.
 */
import OpenAI from "openai";
import { createVerifyingFetch, fetchTransport, verifyingFetch } from "../src/client/node.ts";
import { gatewayModel, startGateway } from "./gateway_setup.ts";
import { spawnPinned } from "./processes.ts";
import { fmt, type Row } from "./report.ts";
import { percentile } from "./stats.ts";
import { runStandalone } from "./standalone.ts";

const BATCH = 10;
type PathName =
  | "plain"
  | "library"
  | "library (no inclusion)"
  | "library (runtime fetch)"
  | "proxy";

export interface VerifyingClientBench {
  gatewayUrl: string;
  key: string;
  dir: string;
  cpu: number;
  rounds: number;
  log: (msg: string) => void;
}

/** The rows, and how many requests were answered (each has a receipt in the gateway's store). */
export async function measureVerifyingClient(
  o: VerifyingClientBench,
): Promise<{ rows: Row[]; ok: number }> {
  const policyPath = `${o.dir}/proxy-policy.json`;
  await Deno.writeTextFile(policyPath, JSON.stringify({ allow_dev_evidence: true }));
  const proxy = await spawnPinned(o.cpu, [
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
    `${o.dir}/proxy-audit.jsonl`,
  ], /verifying proxy for \S+ on (http:\/\/[^/\s]+)\/v1/);
  const lib = verifyingFetch({
    baseURL: `${o.gatewayUrl}/v1`,
    policy: { allow_dev_evidence: true },
  });
  const libNoLog = verifyingFetch({
    baseURL: `${o.gatewayUrl}/v1`,
    policy: { allow_dev_evidence: true, inclusion: "off" },
  });
  // The runtime's fetch instead of node:http (plain http here: nothing to pin either way).
  const libFetch = createVerifyingFetch({
    baseURL: `${o.gatewayUrl}/v1`,
    policy: { allow_dev_evidence: true },
    transport: fetchTransport(),
  });
  const client = (baseURL: string, f?: typeof fetch) =>
    new OpenAI({ baseURL, apiKey: o.key, maxRetries: 0, ...(f ? { fetch: f } : {}) });
  const clients: Record<PathName, OpenAI> = {
    plain: client(`${o.gatewayUrl}/v1`),
    library: client(`${o.gatewayUrl}/v1`, lib),
    "library (no inclusion)": client(`${o.gatewayUrl}/v1`, libNoLog),
    "library (runtime fetch)": client(`${o.gatewayUrl}/v1`, libFetch),
    proxy: client(`${proxy.url}/v1`),
  };
  const paths = Object.keys(clients) as PathName[];
  const whole: Record<string, number[]> = {};
  const streamed: Record<string, number[]> = {};
  const body = {
    model: gatewayModel("chat"),
    messages: [{ role: "user" as const, content: "bench the verifying client" }],
  };
  let ok = 0;
  const one = async (p: PathName, stream: boolean, into: Record<string, number[]> | null) => {
    const t0 = performance.now();
    if (stream) {
      for await (const _ of await clients[p].chat.completions.create({ ...body, stream: true })) {
        // read to the end: the verdict comes before the final event
      }
    } else await clients[p].chat.completions.create(body);
    (into ? (into[p] ??= []) : []).push(performance.now() - t0);
    ok++; // a failed request throws (and ends the run)
  };
  try {
    for (const p of paths) for (let i = 0; i < 3; i++) await one(p, false, null); // attest, connect
    for (let round = 0; round < o.rounds; round++) {
      o.log(`verifying client round ${round + 1}/${o.rounds}`);
      const order = paths.map((_, i) => paths[(i + round) % paths.length]);
      for (const p of order) {
        for (let i = 0; i < BATCH; i++) await one(p, false, whole);
        for (let i = 0; i < BATCH; i++) await one(p, true, streamed);
      }
    }
  } finally {
    lib.close();
    libNoLog.close();
    libFetch.close();
    await proxy.stop();
  }
  const cell = (samples: Record<string, number[]>, q: number) => {
    const base = percentile(samples.plain, q);
    return paths.map((p) => {
      const v = percentile(samples[p], q);
      return p === "plain" ? `plain ${fmt(v)}` : `${p} ${fmt(v)} (+${fmt(v - base)})`;
    }).join(" · ");
  };
  const n = o.rounds * BATCH;
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
  ];
  return { rows, ok };
}

if (import.meta.main) {
  await runStandalone("verifying-client", { rounds: 3, seconds: 1 }, async (o) => {
    const gw = await startGateway(o.dir, o.mockUrl, o.serverCpu);
    try {
      return (await measureVerifyingClient({
        gatewayUrl: gw.url,
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
