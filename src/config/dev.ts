/**
 * The embedded development configuration used by `deno task dev`: two local
 * demo upstreams (a plain one without zero data retention, and a ZDR one
 * marked confidential, whose verification is a development verifier that
 * says so), a few chat models and two embedding models.
 */
import { configSchema, type GatewayConfig } from "./schema.ts";

export interface DevUpstreams {
  plainUrl: string;
  confidentialUrl: string;
  /** PEM of the CA that issued the confidential demo upstream's TLS certificate. */
  confidentialCaPem?: string;
}

const CREATED = 1_767_225_600; // 2026-01-01

const chatParams = [
  "temperature",
  "top_p",
  "stop",
  "n",
  "presence_penalty",
  "frequency_penalty",
  "stream",
  "seed",
];

// Long as one configuration literal.
export function devConfig(
  up: DevUpstreams,
  opts: { port: number; storePath: string; teePort?: number },
): GatewayConfig {
  const pricing = { prompt: 0.0000002, completion: 0.0000008 };
  const raw = {
    development: true,
    listen: {
      base: { hostname: "127.0.0.1", port: opts.port },
      ...(opts.teePort !== undefined ? { tee: { hostname: "127.0.0.1", port: opts.teePort } } : {}),
    },
    // One worker: each would start its own demo upstreams (main.ts), and a development
    // gateway is one process to debug and stop (docs/decisions/workers.md).
    serve: { workers: 1 },
    store: { path: opts.storePath },
    identity: { quote_provider: "dev", allow_dev_quotes: true, subject: "dev.gateway.local" },
    providers: [
      { name: "plain", base_url: up.plainUrl, zdr: false, priority: 1, timeout_ms: 30_000 },
      {
        name: "secure",
        base_url: up.confidentialUrl,
        zdr: true,
        priority: 0,
        timeout_ms: 30_000,
        vendor: "demo-tee",
        confidential: {
          verifier: "dev",
          ...(up.confidentialCaPem ? { tls_ca_pem: up.confidentialCaPem } : {}),
          session_ttl_seconds: 3600,
          // The documented development switch: the dev session (no TEE) counts for
          // aci_verified so the flow can be demonstrated; its claims say so.
          dev_counts_for_aci_verified: true,
        },
      },
    ],
    models: [
      {
        id: "demo/echo",
        name: "Demo Echo",
        aliases: ["demo/echo-latest"],
        created: CREATED,
        context_length: 32_768,
        max_output_length: 4096,
        input_modalities: ["text"],
        output_modalities: ["text"],
        pricing,
        supported_parameters: [
          "max_tokens",
          "tools",
          "tool_choice",
          "response_format",
          ...chatParams,
        ],
        supported_features: ["tools", "structured_outputs"],
        routes: [{ provider: "secure", model: "demo-chat" }, {
          provider: "plain",
          model: "demo-chat",
        }],
      },
      {
        id: "demo/echo-next",
        name: "Demo Echo Next (max_completion_tokens)",
        created: CREATED,
        context_length: 65_536,
        max_output_length: 8192,
        input_modalities: ["text"],
        output_modalities: ["text"],
        pricing: { ...pricing, input_cache_read: 0.00000005 },
        supported_parameters: [
          "max_completion_tokens",
          "tools",
          "tool_choice",
          "reasoning_effort",
          ...chatParams,
        ],
        supported_features: ["tools", "reasoning"],
        routes: [{ provider: "plain", model: "demo-reasoner" }],
      },
      {
        id: "demo/vision",
        name: "Demo Vision",
        created: CREATED,
        context_length: 32_768,
        max_output_length: 4096,
        input_modalities: ["text", "image"],
        output_modalities: ["text"],
        pricing,
        supported_parameters: ["max_tokens", ...chatParams],
        supported_features: [],
        routes: [{ provider: "plain", model: "demo-chat" }],
      },
      {
        id: "demo/private",
        name: "Demo Private (confidential only)",
        created: CREATED,
        context_length: 32_768,
        max_output_length: 4096,
        input_modalities: ["text"],
        output_modalities: ["text"],
        pricing,
        supported_parameters: ["max_tokens", "tools", "tool_choice", ...chatParams],
        supported_features: ["tools"],
        routes: [{ provider: "secure", model: "demo-chat" }],
      },
    ],
    embedding_models: [
      {
        id: "demo/embed-large",
        name: "Demo Embed Large",
        created: CREATED,
        default_dimensions: 3072,
        dimensions_range: [256, 3072],
        max_input_tokens: 8191,
        pricing: { prompt: 0.00000013 },
        routes: [{ provider: "secure", model: "demo-embed" }, {
          provider: "plain",
          model: "demo-embed",
        }],
      },
      {
        id: "demo/embed-small",
        name: "Demo Embed Small",
        created: CREATED,
        input_modalities: ["text", "image", "video"],
        default_dimensions: 384,
        max_input_tokens: 8191,
        pricing: { prompt: 0.00000002 },
        routes: [{ provider: "plain", model: "demo-embed" }],
      },
    ],
  };
  return configSchema.parse(raw);
}
