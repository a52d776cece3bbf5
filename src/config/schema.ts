/**
 * The gateway's configuration: one JSON document, validated with zod at
 * start-up. A bad file stops the gateway with the path of the bad field.
 */
import { z } from "zod";
import { SNP_PRODUCTS } from "./attestation_names.ts";
import {
  embeddingModel,
  limits,
  listener,
  model,
  origin,
  provider,
  UPSTREAM_BODY_LIMIT_DEFAULTS,
  upstreamBodyLimits,
} from "./sub_schemas.ts";

export const configSchema = z.strictObject({
  /** Marks the embedded development configuration; production files must not set it. */
  development: z.boolean().default(false),
  listen: z.strictObject({
    base: listener,
    /** Optional second listener serving the `{tee_url}` host (attested-session endpoints). */
    tee: listener.optional(),
  }),
  serve: z.strictObject({
    /**
     * Worker processes on this host (docs/decisions/workers.md): each serves every
     * listener (SO_REUSEPORT) on the one store; "auto" is the machine's core count.
     */
    workers: z.union([z.literal("auto"), z.number().int().min(1).max(256)]).default("auto"),
  }).default({ workers: "auto" }),
  store: z.strictObject({
    /** A local Deno KV file, or a KV Connect URL (`https://…`, token in DENO_KV_ACCESS_TOKEN). */
    path: z.string().min(1),
    /**
     * Quota leases: while this is the only replica on the store, admit most
     * requests from a small reserved slice of the key's limits in memory (no
     * KV commit before the prompt leaves). See src/admission/leases.ts.
     */
    quota_leases: z.boolean().default(true),
    /**
     * Most requests' worth of credits and tokens in one lease slice: what a
     * crashed process holds until another refunds it (src/admission/holds.ts).
     */
    lease_max_requests: z.number().int().min(2).max(4096).default(64),
    /**
     * How long a replica's announcement lives without a heartbeat (sent every
     * third of it); a crashed replica's holds are refunded once it lapses.
     */
    replica_ttl_seconds: z.number().int().min(1).max(3600).default(60),
  }),
  limits: z.strictObject({
    max_body_bytes: z.number().int().positive().default(4 * 1024 * 1024),
    stream_idle_timeout_ms: z.number().int().positive().default(120_000),
    /** Silence after which a stream gets the format's keep-alive frame (Anthropic `event: ping`). */
    sse_keepalive_ms: z.number().int().positive().default(15_000),
    /** Output tokens reserved (credits, tokens/min) when a request names no maximum. */
    default_output_reserve: z.number().int().positive().default(1024),
    // Hostile clients (docs/decisions/012-hostile-clients-connections-and-bodies.md): connections and request bodies.
    max_connections: z.number().int().positive().default(4096),
    header_timeout_ms: z.number().int().positive().default(10_000),
    idle_timeout_ms: z.number().int().positive().default(60_000),
    body_timeout_ms: z.number().int().positive().default(60_000),
    body_bytes_in_flight: z.number().int().positive().default(32 * 1024 * 1024),
    body_bytes_in_flight_per_key: z.number().int().positive().default(4 * 1024 * 1024),
    ...upstreamBodyLimits,
  }).default({
    max_body_bytes: 4 * 1024 * 1024,
    stream_idle_timeout_ms: 120_000,
    sse_keepalive_ms: 15_000,
    default_output_reserve: 1024,
    max_connections: 4096,
    header_timeout_ms: 10_000,
    idle_timeout_ms: 60_000,
    body_timeout_ms: 60_000,
    body_bytes_in_flight: 32 * 1024 * 1024,
    body_bytes_in_flight_per_key: 4 * 1024 * 1024,
    ...UPSTREAM_BODY_LIMIT_DEFAULTS,
  }),
  identity: z.strictObject({
    subject: z.string().nullable().default(null),
    keyset_ttl_seconds: z.number().int().positive().default(86_400),
    /** `configfs` = real TEE via configfs-tsm; `dev` = loudly non-hardware development quotes. */
    quote_provider: z.enum(["configfs", "dev", "auto"]).default("auto"),
    configfs_root: z.string().default("/sys/kernel/config/tsm/report"),
    allow_dev_quotes: z.boolean().default(false),
    /** Build manifest written by `deno task compile` (feeds `source_provenance`). */
    manifest_path: z.string().optional(),
    /** Env var holding the E2EE seed replicas share (64 hex; from the TEE's KMS). Unset: per-keyset random keys. */
    e2ee_seed_env: z.string().optional(),
  }).default({
    subject: null,
    keyset_ttl_seconds: 86_400,
    quote_provider: "auto",
    configfs_root: "/sys/kernel/config/tsm/report",
    allow_dev_quotes: false,
  }),
  /** Trust anchors and collateral for verifying upstream TEE evidence. */
  trust: z.strictObject({
    /** PEM of the Intel SGX Root CA to pin (default: Intel's real root, built in). */
    intel_root_ca_pem: z.string().optional(),
    /** Intel PCS or a PCCS base URL for TDX collateral (default Intel PCS)… */
    pcs_url: z.url().optional(),
    /** …or a directory of collateral files `<fmspc>.json` (dcap-qvl JSON shape) for offline operation. */
    collateral_dir: z.string().optional(),
    /** AMD roots and VCEKs for `sev-snp` upstreams. */
    sev_snp: z.strictObject({
      roots: z.array(z.strictObject({
        product: z.enum(SNP_PRODUCTS),
        ask_ark_pem: z.string().min(1),
      })).min(1),
      vcek_dir: z.string().optional(),
      kds_url: z.url().optional(),
    }).optional(),
    /** Operator keys that sign measurement policies (Ed25519, raw 32-byte public key in hex). */
    measurement_policy_keys: z.array(z.strictObject({
      key_id: z.string().min(1),
      public_key: z.string().regex(/^[0-9a-f]{64}$/),
    })).default([]),
    /** NVIDIA GPU evidence: pinned roots (default built in), RIM service / OCSP responder or a collateral directory. */
    nvidia: z.strictObject({
      device_root_pem: z.string().optional(),
      rim_root_pem: z.string().optional(),
      rim_service_url: z.url().optional(),
      ocsp_url: z.url().optional(),
      /** RIMs (`NV_GPU_*.xml`) and OCSP responses (DER or base64) for offline operation. */
      collateral_dir: z.string().optional(),
    }).optional(),
  }).default({ measurement_policy_keys: [] }),
  /**
   * How upstreams are reached. `http1` (default): the gateway's own HTTP/1.1
   * client over plain sockets (src/upstream/h1_client.ts: less memory per open
   * stream and less CPU per request than `fetch`). `fetch`: Deno's `fetch`
   * (HTTP/2, and the HTTP(S)_PROXY variables, which `http1` does not honour;
   * main.ts falls back to it when a proxy variable is set).
   */
  upstream: z.strictObject({
    client: z.enum(["http1", "fetch"]).default("http1"),
    /** Variable holding the secret per-key prefix-cache salts are derived from. */
    cache_salt_secret_env: z.string().optional(),
  }).default({ client: "http1" }),
  receipts: z.strictObject({
    retention_days: z.number().int().positive().default(30),
    /** Refusals (nothing forwarded): own receipts per key per window, then one shared receipt. */
    refusal_retention_days: z.number().int().positive().default(1),
    refusal_budget: z.number().int().nonnegative().default(10),
    refusal_window_seconds: z.number().int().positive().default(600),
  }).default({
    retention_days: 30,
    refusal_retention_days: 1,
    refusal_budget: 10,
    refusal_window_seconds: 600,
  }),
  /** The transparency log (C2SP tlog-tiles under /v1/aci/log/; docs/decisions/transparency-log-*.md). */
  transparency_log: z.strictObject({
    /** Checkpoint origin and note key name: the log's URL prefix without scheme (default: `<identity.subject or localhost>/v1/aci/log`). */
    origin: z.string().regex(/^[^\s+]+$/, "no spaces or plus signs").optional(),
    /** How often each replica looks for entries another (crashed) replica committed but did not sequence. */
    sweep_interval_ms: z.number().int().min(10).max(1000).default(250),
    /** How long a commit's new entries wait for others before they are sequenced together (amortizes each append's tile and bundle writes). */
    batch_ms: z.number().int().min(0).max(500).default(100),
    /** Witnesses asked to cosign each new checkpoint (C2SP tlog-witness). */
    witnesses: z.array(z.strictObject({
      /** Submission prefix; `add-checkpoint` is posted under it. */
      url: z.url(),
      /** The witness's cosigner vkey (`name+id+base64(0x04 ‖ key)`). */
      vkey: z.string().min(1),
    })).default([]),
    /** Cosignatures a checkpoint needs before /v1/aci/log/checkpoint serves it (0: serve at once, cosignatures added when they come). */
    required_cosignatures: z.number().int().nonnegative().default(0),
  }).default({ sweep_interval_ms: 250, batch_ms: 100, witnesses: [], required_cosignatures: 0 }),
  tiers: z.strictObject({ free: limits, pro: limits, enterprise: limits }).default({
    free: { rpm: 60, tpm: 100_000 },
    pro: { rpm: 600, tpm: 1_000_000 },
    enterprise: { rpm: 6_000, tpm: 10_000_000 },
  }),
  /** Browser origins allowed to call the API (`*` for any); none by default. */
  cors: z.strictObject({
    allowed_origins: z.array(origin).default([]),
  }).default({ allowed_origins: [] }),
  providers: z.array(provider).min(1),
  models: z.array(model).default([]),
  embedding_models: z.array(embeddingModel).default([]),
}).superRefine((cfg, ctx) => {
  const names = new Set<string>();
  cfg.providers.forEach((p, i) => {
    if (names.has(p.name)) {
      ctx.addIssue({
        code: "custom",
        path: ["providers", i, "name"],
        message: "duplicate provider",
      });
    }
    names.add(p.name);
    if (p.confidential?.verifier === "dev" && !cfg.development) {
      ctx.addIssue({
        code: "custom",
        path: ["providers", i, "confidential", "verifier"],
        message:
          "the dev verifier proves nothing and is reserved for the development configuration",
      });
    }
    if (p.confidential?.dev_counts_for_aci_verified && p.confidential.verifier !== "dev") {
      ctx.addIssue({
        code: "custom",
        path: ["providers", i, "confidential", "dev_counts_for_aci_verified"],
        message: "only the dev verifier (development configuration) may count for aci_verified",
      });
    }
    if (p.confidential?.verifier === "sev-snp" && !cfg.trust.sev_snp) {
      ctx.addIssue({
        code: "custom",
        path: ["providers", i, "confidential", "verifier"],
        message: "the sev-snp verifier needs trust.sev_snp (the pinned AMD roots)",
      });
    }
    if (p.confidential?.verifier === "tinfoil" && !p.confidential.tinfoil) {
      ctx.addIssue({
        code: "custom",
        path: ["providers", i, "confidential", "tinfoil"],
        message: "the tinfoil verifier needs the release repository and a Sigstore trusted root",
      });
    }
    const mp = p.confidential?.measurement_policy;
    if ((mp?.file || mp?.required) && cfg.trust.measurement_policy_keys.length === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["providers", i, "confidential", "measurement_policy"],
        message: "a measurement policy needs trust.measurement_policy_keys to verify it",
      });
    }
    if (p.confidential?.verifier === "pinned" && !p.confidential.spki_sha256) {
      ctx.addIssue({
        code: "custom",
        path: ["providers", i, "confidential", "spki_sha256"],
        message: "required for the pinned verifier",
      });
    }
  });
  const ids = new Set<string>();
  const checkRoutes = (
    list: "models" | "embedding_models",
    routes: { provider: string }[],
    i: number,
  ) =>
    routes.forEach((r, j) => {
      if (!names.has(r.provider)) {
        ctx.addIssue({
          code: "custom",
          path: [list, i, "routes", j, "provider"],
          message: `unknown provider "${r.provider}"`,
        });
      }
    });
  cfg.models.forEach((m, i) => {
    for (const id of [m.id, ...m.aliases]) {
      if (ids.has(id)) {
        ctx.addIssue({
          code: "custom",
          path: ["models", i, "id"],
          message: `duplicate model id ${id}`,
        });
      }
      ids.add(id);
    }
    checkRoutes("models", m.routes, i);
  });
  cfg.embedding_models.forEach((m, i) => {
    if (ids.has(m.id)) {
      ctx.addIssue({
        code: "custom",
        path: ["embedding_models", i, "id"],
        message: `duplicate model id ${m.id}`,
      });
    }
    ids.add(m.id);
    checkRoutes("embedding_models", m.routes, i);
    const r = m.dimensions_range;
    if (r && (r[0] > r[1] || m.default_dimensions < r[0] || m.default_dimensions > r[1])) {
      ctx.addIssue({
        code: "custom",
        path: ["embedding_models", i, "dimensions_range"],
        message: "range must be ordered and contain default_dimensions",
      });
    }
  });
});

export type GatewayConfig = z.infer<typeof configSchema>;
export type ProviderConfig = GatewayConfig["providers"][number];
export type ModelConfig = GatewayConfig["models"][number];
export type EmbeddingModelConfig = GatewayConfig["embedding_models"][number];
export type TierLimits = GatewayConfig["tiers"];

/** Parse and validate a configuration document; the error names the bad field's path. */
export function parseConfig(text: string): GatewayConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`configuration is not valid JSON: ${(e as Error).message}`);
  }
  // `$schema` points editors at config/schema.json; it is not configuration.
  if (typeof raw === "object" && raw !== null && !Array.isArray(raw) && "$schema" in raw) {
    const { $schema, ...rest } = raw as Record<string, unknown>;
    if (typeof $schema !== "string") throw new ConfigError("$schema must be a string");
    raw = rest;
  }
  const res = configSchema.safeParse(raw);
  if (!res.success) {
    const lines = res.error.issues.map((iss) => {
      const path = iss.path.length ? iss.path.map(String).join(".") : "(root)";
      return `  ${path}: ${iss.message}`;
    });
    throw new ConfigError(`invalid configuration:\n${lines.join("\n")}`);
  }
  return res.data;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}
