/**
 * The configuration's sub-schemas: providers, models, routes, listeners and
 * per-tier limits (schema.ts assembles the document from them).
 */
import { z } from "zod";
import { TOKENIZERS } from "../tokens/mod.ts";
import { ACCEPTABLE_TCB_STATUSES, DEFAULT_ACCEPTED_TCB_STATUSES } from "./attestation_names.ts";

const modality = z.enum(["text", "image", "file", "video", "audio"]);
const price = z.number().nonnegative().finite();
const providerName = z.string().regex(
  /^[a-z0-9][a-z0-9_-]*$/,
  "lowercase letters, digits, - and _",
);

const confidential = z.strictObject({
  /** Which verifier checks this upstream before prompts are sent to it. */
  verifier: z.enum(["dstack-tdx", "aci", "sev-snp", "near-ai", "tinfoil", "pinned", "dev"]),
  /** Operator-pinned SPKI SHA-256 (hex) for the `pinned` verifier. */
  spki_sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
  /** PEM trust anchors for the upstream's TLS certificate (default: system roots). */
  tls_ca_pem: z.string().optional(),
  /** Allow-lists of measurements that make `os_known_good` / `serving_software_known_good` asserted. */
  allowed_mrtd: z.array(z.string().regex(/^[0-9a-f]{96}$/)).default([]),
  allowed_compose_hashes: z.array(z.string().regex(/^[0-9a-f]{64}$/)).default([]),
  /** Session lifetime; never beyond the evidence's own validity. */
  session_ttl_seconds: z.number().int().positive().default(3600),
  /** Re-verify this long before a session expires. */
  reverify_margin_seconds: z.number().int().positive().default(300),
  /** Fail verification unless the upstream's NVIDIA GPU evidence passes every check; default false. */
  require_gpu: z.boolean().optional(),
  /**
   * Opt-out of failing closed: while unverified, this upstream still receives
   * requests that do not demand `aci_verified` (warned at start-up and on every use).
   */
  allow_unverified: z.boolean().optional(),
  /**
   * Development only (`verifier: "dev"`): let the dev session satisfy `aci_verified`
   * so `task dev` demonstrates the flow; the session's claims say so.
   */
  dev_counts_for_aci_verified: z.boolean().optional(),
  /**
   * TDX policy of the TDX-based verifiers (`dstack-tdx`, `aci`; docs/decisions/tdx-tcb-policy.md):
   * the TCB statuses accepted (NotSupported, Revoked and an unknown TDX module always fail),
   * and the per-provider opt-in for TDs with SEPT_VE_DISABLE = 0 (Azure TDX VMs).
   */
  tdx: z.strictObject({
    accepted_tcb_statuses: z.array(z.enum(ACCEPTABLE_TCB_STATUSES)).min(1).default([
      ...DEFAULT_ACCEPTED_TCB_STATUSES,
    ]),
    allow_sept_ve_enabled: z.boolean().default(false),
  }).optional(),
  /**
   * Measurement policy (docs/decisions/measurement-policy.md): a signed accept-list of
   * measurements; the upstream receives no prompt unless its measurements match an entry.
   */
  measurement_policy: z.strictObject({
    /** Signed policy file loaded at start-up (later versions arrive through the admin API). */
    file: z.string().optional(),
    /** Fail closed while no policy is installed (default false: no policy, no check). */
    required: z.boolean().optional(),
    /** Warn on /healthz, in metrics and the log this long before the upstream fails closed. */
    warn_before_seconds: z.number().int().positive().default(86_400),
  }).optional(),
  /** NEAR AI Cloud (`near-ai` verifier): the model whose CVMs are attested with the gateway's. */
  near_ai: z.strictObject({
    /** `model` query of /v1/attestation/report; absent: the gateway CVM only. */
    model: z.string().min(1).optional(),
  }).optional(),
  /** Tinfoil (`tinfoil` verifier): the release whose Sigstore-signed measurement the enclave must run. */
  tinfoil: z.strictObject({
    /** GitHub repository the release is built from (`owner/name`), e.g. tinfoilsh/confidential-model-router. */
    repo: z.string().regex(/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/),
    /** Sigstore trusted root (JSON text, `application/vnd.dev.sigstore.trustedroot+json`). */
    trusted_root_json: z.string().min(1),
    /** OIDC issuer of the signing certificate. */
    oidc_issuer: z.string().default("https://token.actions.githubusercontent.com"),
    /** Only workflow refs under this prefix sign releases. */
    workflow_ref_prefix: z.string().default("refs/tags/"),
    /** The release's Sigstore bundle (JSON text), for enclaves that serve a bare attestation document. */
    release_bundle_json: z.string().min(1).optional(),
    /** Attestation path on the enclave. */
    attestation_path: z.string().default("/.well-known/tinfoil-attestation"),
  }).optional(),
  /** Policy for the `sev-snp` verifier (docs/decisions/014-sev-snp-upstreams.md). */
  sev_snp: z.strictObject({
    allowed_measurements: z.array(z.string().regex(/^[0-9a-f]{96}$/)).default([]),
    min_tcb: z.strictObject({
      /** Turin only (its TCB_VERSION has an FMC SPL); ignored for Milan and Genoa. */
      fmc: z.number().int().min(0).max(255).optional(),
      bootloader: z.number().int().min(0).max(255),
      tee: z.number().int().min(0).max(255),
      snp: z.number().int().min(0).max(255),
      microcode: z.number().int().min(0).max(255),
    }).optional(),
    /** Fail verification (no session, no prompt) when REPORTED_TCB is below `min_tcb`; default false. */
    require_min_tcb: z.boolean().optional(),
  }).refine((p) => !p.require_min_tcb || p.min_tcb !== undefined, {
    message: "require_min_tcb needs min_tcb",
    path: ["require_min_tcb"],
  }).optional(),
});

export const provider = z.strictObject({
  name: providerName,
  base_url: z.url(),
  /** Name of the environment variable holding the upstream credential (never the credential itself). */
  api_key_env: z.string().optional(),
  zdr: z.boolean(),
  priority: z.number().int().default(0),
  timeout_ms: z.number().int().positive().default(60_000),
  /** Client formats the upstream serves natively (forwarded untranslated). */
  native_formats: z.array(z.enum(["messages", "responses"])).default([]),
  confidential: confidential.optional(),
  /** Vendor label for the legacy `GET /v1/models/<vendor>` listing. */
  vendor: z.string().optional(),
  /** The upstream takes vLLM's `cache_salt` (prefix-cache isolation per key). */
  cache_salt: z.boolean().optional(),
});

/** A browser origin (`scheme://host[:port]`, no path) or `*`. */
export const origin = z.string().regex(
  /^\*$|^https?:\/\/([A-Za-z0-9.-]+|\[[0-9a-fA-F:.]+\])(:\d{1,5})?$/,
  "an origin like https://app.example.com, or *",
);
/** Bounds on what an upstream may send back: size and time, streamed or not. */
export const UPSTREAM_BODY_LIMIT_DEFAULTS = {
  /** A non-streamed upstream answer larger than this fails (502) instead of being buffered. */
  max_upstream_body_bytes: 32 * 1024 * 1024,
  /** A stream's total upstream bytes. */
  max_upstream_stream_bytes: 64 * 1024 * 1024,
  /** One SSE event's bytes (a line never ends: the event is refused, not buffered). */
  max_sse_event_bytes: 1024 * 1024,
  /** Whole-body deadline after the response head, streamed or not. */
  upstream_body_timeout_ms: 600_000,
  /** Longest silence while a non-streamed body is read (streams: stream_idle_timeout_ms). */
  upstream_read_idle_ms: 30_000,
};
export const upstreamBodyLimits = {
  max_upstream_body_bytes: z.number().int().positive().default(
    UPSTREAM_BODY_LIMIT_DEFAULTS.max_upstream_body_bytes,
  ),
  max_upstream_stream_bytes: z.number().int().positive().default(
    UPSTREAM_BODY_LIMIT_DEFAULTS.max_upstream_stream_bytes,
  ),
  max_sse_event_bytes: z.number().int().positive().default(
    UPSTREAM_BODY_LIMIT_DEFAULTS.max_sse_event_bytes,
  ),
  upstream_body_timeout_ms: z.number().int().positive().default(
    UPSTREAM_BODY_LIMIT_DEFAULTS.upstream_body_timeout_ms,
  ),
  upstream_read_idle_ms: z.number().int().positive().default(
    UPSTREAM_BODY_LIMIT_DEFAULTS.upstream_read_idle_ms,
  ),
};

const embeddingRoute = z.strictObject({ provider: providerName, model: z.string().min(1) });

const route = z.strictObject({
  provider: providerName,
  model: z.string().min(1),
  /** Request parameters this upstream refuses (e.g. `n`): not advertised, refused with a 400 naming them. */
  unsupported_parameters: z.array(z.string().min(1)).optional(),
});

const tokenParam = z.enum(["max_tokens", "max_completion_tokens"]);

export const model = z.strictObject({
  id: z.string().regex(/^[^/\s]+\/[^\s]+$/, "must be <provider>/<model>"),
  name: z.string().min(1),
  aliases: z.array(z.string().regex(/^[^/\s]+\/[^\s]+$/)).default([]),
  created: z.number().int().nonnegative(),
  context_length: z.number().int().positive(),
  max_output_length: z.number().int().positive(),
  input_modalities: z.array(modality).min(1),
  output_modalities: z.array(modality).min(1),
  pricing: z.strictObject({ prompt: price, completion: price, input_cache_read: price.optional() }),
  supported_parameters: z.array(z.string()).min(1),
  supported_features: z.array(z.string()).default([]),
  /** BPE encoding for token limits and estimates (absent: o200k_base, the documented fallback). */
  tokenizer: z.enum(TOKENIZERS).optional(),
  /**
   * Refuse the token parameter the model does not take (the spec's 400) instead of renaming it
   * (docs/decisions/chat-token-parameter.md).
   */
  strict_token_parameter: z.boolean().optional(),
  routes: z.array(route).min(1),
}).refine(
  (m) => m.supported_parameters.filter((p) => tokenParam.safeParse(p).success).length === 1,
  {
    message: "supported_parameters must list exactly one of max_tokens / max_completion_tokens",
    path: ["supported_parameters"],
  },
);

export const embeddingModel = z.strictObject({
  id: z.string().regex(/^[^/\s]+\/[^\s]+$/, "must be <provider>/<model>"),
  name: z.string().min(1),
  created: z.number().int().nonnegative(),
  input_modalities: z.array(modality).default(["text"]),
  default_dimensions: z.number().int().positive(),
  /** Inclusive range of `dimensions` the model accepts; absent = the parameter is not supported. */
  dimensions_range: z.tuple([z.number().int().positive(), z.number().int().positive()]).optional(),
  max_input_tokens: z.number().int().positive(),
  /** BPE encoding for input limits and estimates (absent: o200k_base, the documented fallback). */
  tokenizer: z.enum(TOKENIZERS).optional(),
  pricing: z.strictObject({ prompt: price }),
  routes: z.array(embeddingRoute).min(1),
});

export const limits = z.strictObject({
  rpm: z.number().int().positive(),
  tpm: z.number().int().positive(),
});

export const listener = z.strictObject({
  hostname: z.string().default("127.0.0.1"),
  port: z.number().int().min(0).max(65535),
  /** PEM files when the gateway terminates TLS itself. */
  tls_cert_file: z.string().optional(),
  tls_key_file: z.string().optional(),
});
