/**
 * The real gateway under test: a config pointing at the mock upstream, a KV
 * file on a temp disk directory, and an enterprise key whose limits and
 * credits never interfere with the measurement.
 */
import { GATEWAY_V8_FLAGS } from "../enclave/build_args.ts";
import { createKey } from "../src/keys/keys.ts";
import { NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { RECEIPT_PREFIX } from "../src/receipts/service.ts";
import { type Server, spawnPinned } from "./processes.ts";

/** Gateway model id for each mock upstream model. */
export const gatewayModel = (upstreamModel: string) => `bench/${upstreamModel}`;

/**
 * A long-context model (routed to the mock's `chat`) for prompt-size rows: its
 * context holds a megabyte of prompt, so the context check passes and what is
 * measured is the cost of carrying the prompt (bench/prompt_size.ts).
 */
export const LONG_MODEL = "bench/long";
export const LONG_CONTEXT = 2_097_152;

/**
 * A coding agent's model (routed to the mock's `chat`): a 200k-token context
 * like today's frontier models, so a 100k-token conversation's byte ceiling
 * does not fit and its prompt is counted (bench/agent_turns.ts).
 */
export const AGENT_MODEL = "bench/agent";
export const AGENT_CONTEXT = 200_000;

/** Gateway model id for each mock model on the verified confidential path. */
export const verifiedModel = (upstreamModel: string) => `verified/${upstreamModel}`;

function model(upstreamModel: string, id = gatewayModel(upstreamModel), provider = "mock") {
  return {
    id,
    name: `Bench ${upstreamModel}`,
    created: 1,
    context_length: 8192,
    max_output_length: 1024,
    input_modalities: ["text"],
    output_modalities: ["text"],
    pricing: { prompt: 0.000001, completion: 0.000002 },
    supported_parameters: ["max_tokens", "temperature"],
    routes: [{ provider, model: upstreamModel }],
  };
}

const UNLIMITED = { rpm: 1_000_000_000, tpm: 1_000_000_000_000 };

export interface GatewayUnderTest extends Server {
  key: string;
  storePath: string;
}

/** Writes config and key into `dir`, then starts the gateway pinned to `cpu` (or a taskset list). */
export async function startGateway(
  dir: string,
  upstreamUrl: string,
  cpu: number | string,
  denoFlags: string[] = [],
  /** The TLS mock (mock_upstream_tls.ts): a confidential provider, its key operator-pinned. */
  verified?: { url: string; caPem: string; spkiSha256: string },
  env: Record<string, string> = {},
  /** A file for the gateway's stdout (its log lines, and `--trace-gc` output). */
  stdoutTo?: string,
  /** Overrides of the configuration's `limits` (e.g. larger bodies in flight per key). */
  limits?: Record<string, number>,
  /** `serve.workers`: one unless a row measures workers (bench/workers.ts). */
  workers = 1,
): Promise<GatewayUnderTest> {
  const storePath = `${dir}/gateway.kv`;
  const config = {
    listen: { base: { hostname: "127.0.0.1", port: 0 } },
    serve: { workers },
    store: { path: storePath },
    identity: { quote_provider: "dev", allow_dev_quotes: true },
    ...(limits ? { limits } : {}),
    tiers: { free: UNLIMITED, pro: UNLIMITED, enterprise: UNLIMITED },
    providers: [
      { name: "mock", base_url: upstreamUrl, zdr: false },
      ...(verified
        ? [{
          name: "tee",
          base_url: verified.url,
          zdr: true,
          confidential: {
            verifier: "pinned",
            spki_sha256: verified.spkiSha256,
            tls_ca_pem: verified.caPem,
          },
        }]
        : []),
    ],
    models: [
      ...["chat", "delay", "hold"].map((m) => model(m)),
      { ...model("chat", LONG_MODEL), context_length: LONG_CONTEXT },
      {
        ...model("chat", AGENT_MODEL),
        context_length: AGENT_CONTEXT,
        max_output_length: 32_000,
        supported_parameters: ["max_tokens", "temperature", "tools", "tool_choice"],
        supported_features: ["tools"],
      },
      ...(verified ? ["chat", "delay", "hold"].map((m) => model(m, verifiedModel(m), "tee")) : []),
    ],
  };
  const configPath = `${dir}/config.json`;
  await Deno.writeTextFile(configPath, JSON.stringify(config, null, 2));
  const kv = await Deno.openKv(storePath);
  const { key } = await createKey(kv, {
    tier: "enterprise",
    name: "bench",
    ...UNLIMITED,
    creditsNano: 1_000_000_000n * NANO_PER_CREDIT,
    now: Date.now,
  });
  kv.close();
  const server = await spawnPinned(
    cpu,
    // As `deno task start` runs it.
    [
      "run",
      "-A",
      `--v8-flags=${GATEWAY_V8_FLAGS.join(",")}`,
      ...denoFlags,
      "main.ts",
      "serve",
      "--config",
      configPath,
    ],
    /gateway base listening on (http:\/\/[^/\s]+)/,
    { env, stdoutTo },
  );
  return { ...server, key, storePath };
}

/** Ids of the receipts durably stored in the gateway's KV file (read after it stopped). */
export async function storedReceiptIds(storePath: string): Promise<Set<string>> {
  const kv = await Deno.openKv(storePath);
  const ids = new Set<string>();
  for await (const e of kv.list({ prefix: [RECEIPT_PREFIX] })) ids.add(String(e.key[1]));
  kv.close();
  return ids;
}
