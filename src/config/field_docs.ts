/**
 * One sentence or two per configuration field, keyed by its path (`[]` marks
 * an array element). `reference.ts` puts them into `config/schema.json` and
 * `docs/configuration.md`; a field without an entry here, or an entry for a
 * field the zod schema does not have, stops the generator (and fails the test).
 */
export const FIELD_DOCS: Readonly<Record<string, string>> = {
  "$schema":
    "The JSON Schema this file follows (`./schema.json`), for editors; ignored by the gateway.",
  development:
    "Marks the embedded development configuration (`task dev`); a configuration file must not set it.",

  listen: "Where the gateway listens.",
  "listen.base": "The main listener: the OpenAI/Anthropic API, reports, receipts.",
  "listen.base.hostname": "Address to bind (`0.0.0.0` for all interfaces).",
  "listen.base.port":
    "TCP port; `--port N` or `PORT` overrides it (0 = any free port, printed at start-up).",
  "listen.base.tls_cert_file":
    "PEM certificate chain when the gateway terminates TLS itself (needs `tls_key_file`); its SPKI " +
    "is listed in the attested keyset so clients can pin it. Without both files it serves HTTP.",
  "listen.base.tls_key_file": "PEM private key for `tls_cert_file`.",
  "listen.tee": "Optional second listener for the `{tee_url}` host (attested-session endpoints).",
  "listen.tee.hostname": "Address to bind.",
  "listen.tee.port": "TCP port of the `{tee_url}` listener.",
  "listen.tee.tls_cert_file": "PEM certificate chain (with `tls_key_file`), as for `listen.base`.",
  "listen.tee.tls_key_file": "PEM private key for `tls_cert_file`.",

  serve: "How the gateway runs on this host.",
  "serve.workers":
    "Gateway worker processes on this host, each serving every listener (the kernel spreads " +
    "connections, Linux `SO_REUSEPORT`) on the one store, with quota leases split between them and " +
    'one transparency-log appender; `"auto"` is the core count. A dead worker is restarted; ' +
    "SIGTERM drains them all. Outside Linux one worker serves. See docs/decisions/workers.md.",

  store: "Where keys, credits, usage and receipts are kept.",
  "store.path":
    "A local Deno KV file (its directory is created), or a KV Connect URL (`https://…`, token in " +
    "`DENO_KV_ACCESS_TOKEN`) shared by several replicas.",
  "store.quota_leases":
    "While this is the only replica on the store, admit most requests from a small reserved slice " +
    "of the key's limits held in memory (no KV commit before the prompt leaves).",
  "store.lease_max_requests":
    "Most requests' worth of credits and tokens in one quota-lease slice: what a crashed process " +
    "holds until another refunds it (docs/decisions/010-hostile-clients-money-and-storage.md).",
  "store.replica_ttl_seconds":
    "How long a replica's announcement lives without a heartbeat (sent every third of it); a " +
    "crashed replica's held credits are refunded once it lapses.",

  limits: "Request limits.",
  "limits.max_body_bytes": "Largest request body accepted; larger gets 413.",
  "limits.stream_idle_timeout_ms":
    "A stream whose upstream sends nothing for this long is ended with an error event.",
  "limits.sse_keepalive_ms":
    "Silence after which a stream gets the format's keep-alive frame (Anthropic `event: ping`).",
  "limits.default_output_reserve":
    "Output tokens reserved (credits, tokens per minute) when a request names no maximum.",
  "limits.max_connections":
    "Open connections per listener at most; at the cap a new one closes the longest-waiting idle " +
    "or slow connection, or gets 503 when all are busy. Lowered to fit the open-file limit.",
  "limits.header_timeout_ms":
    "A new connection must deliver a complete request head (TLS handshake included) within this.",
  "limits.idle_timeout_ms":
    "A connection with no request in flight is closed after this (also bounds the next head).",
  "limits.body_timeout_ms":
    "The whole request body must arrive within this after the head; else 408.",
  "limits.body_bytes_in_flight":
    "Request-body bytes being read and parsed at once, all keys; further bodies wait their turn.",
  "limits.body_bytes_in_flight_per_key":
    "Request-body bytes being read and parsed at once for one API key.",

  identity: "The gateway's own attested identity.",
  "limits.max_upstream_body_bytes":
    "A non-streamed upstream answer larger than this fails with 502 instead of being buffered (coded answers are refused: identity only).",
  "limits.max_upstream_stream_bytes":
    "A stream's total upstream bytes; beyond it the stream ends with an in-band upstream_error.",
  "limits.max_sse_event_bytes":
    "One upstream SSE event (a line that never ends is refused, not buffered).",
  "limits.upstream_body_timeout_ms":
    "Whole-body deadline after the response head, streamed or not (timeout_ms bounds the wait for the head).",
  "limits.upstream_read_idle_ms":
    "Longest silence while a non-streamed upstream body is read (streams use stream_idle_timeout_ms).",
  "identity.subject":
    "The gateway's public host name, listed with its TLS key in the keyset (null: none).",
  "identity.keyset_ttl_seconds":
    "Lifetime of a receipt-signing keyset; it rotates before `not_after`, old ones stay retrievable.",
  "identity.quote_provider":
    "`configfs`: hardware quotes over configfs-tsm (TDX or SEV-SNP guest) or refuse to start; " +
    "`auto`: configfs-tsm when present, else the development provider if `allow_dev_quotes`, else " +
    "refuse to start; `dev`: development quotes (needs `allow_dev_quotes`).",
  "identity.configfs_root":
    "The configfs-tsm report directory. Deno reaches paths under /sys only with --allow-all (as " +
    "`task start` and the built artifact run); bind-mount configfs elsewhere to run narrower.",
  "identity.allow_dev_quotes":
    "Consent to development quotes on a machine without a TEE. They prove nothing; the gateway " +
    "warns at start-up and its reports say `dev-insecure-no-tee`. The one change " +
    "`config/example.json` needs to start outside a TEE.",
  "identity.manifest_path":
    "The build manifest of `task compile` (`dist/manifest.json`); fills the reports' " +
    "`source_provenance`. Must be covered by the measurement (inside the image).",
  "identity.e2ee_seed_env":
    "Name of the environment variable holding a 32-byte secret (64 hex) that replicas behind one " +
    "load balancer share, e.g. from the TEE's KMS: their E2EE v2 keys are then derived from it per " +
    "keyset epoch (docs/e2ee.md). Unset: each replica's E2EE keys are random.",

  trust: "Trust anchors and collateral for verifying upstream TEE evidence.",
  "trust.intel_root_ca_pem":
    "PEM of the Intel SGX Root CA to pin (default: Intel's real root, built in).",
  "trust.pcs_url": "Intel PCS or a PCCS base URL for TDX collateral (default: Intel PCS).",
  "trust.collateral_dir":
    "A directory of collateral files `<fmspc>.json` (dcap-qvl JSON shape), for offline operation.",
  "trust.nvidia": "NVIDIA GPU evidence (#21): pinned roots and RIM / OCSP collateral.",
  "trust.nvidia.device_root_pem":
    "PEM of the NVIDIA Device Identity CA to pin (default: NVIDIA's root, built in).",
  "trust.nvidia.rim_root_pem":
    "PEM of the NVIDIA CoRIM signing Root CA to pin (default: NVIDIA's root, built in).",
  "trust.nvidia.rim_service_url":
    "NVIDIA RIM service base URL (`/v1/rim/<id>` is appended; default NVIDIA's). RIMs are cached " +
    "for an hour (VBIOS RIMs get re-issued).",
  "trust.nvidia.ocsp_url":
    "OCSP responder for device and RIM certificates (default NVIDIA's); answers are cached " +
    "until their nextUpdate.",
  "trust.nvidia.collateral_dir":
    "Offline collateral instead of the services: RIM files `NV_GPU_*.xml` and OCSP responses " +
    "(DER or base64), in the directory or one level below.",

  "trust.measurement_policy_keys": "Operator keys that sign measurement policies (Ed25519).",
  "trust.measurement_policy_keys[].key_id":
    "The key's name, as a signed policy's `signature.key_id`.",
  "trust.measurement_policy_keys[].public_key": "Raw 32-byte Ed25519 public key, hex.",
  "trust.sev_snp":
    "AMD SEV-SNP trust for `sev-snp` upstreams: the pinned roots and where VCEKs come from.",
  "trust.sev_snp.roots": "The pinned AMD roots, one entry per processor product.",
  "trust.sev_snp.roots[].product":
    "The product the roots belong to (`Milan`, `Genoa` or `Turin`); a report of version 3 or later " +
    "names its product (CPUID) and is verified only under that product's roots.",
  "trust.sev_snp.roots[].ask_ark_pem":
    "AMD's `ask_ark_<product>.pem`: the ASK then the ARK certificate (PEM). VCEKs must chain to it.",
  "trust.sev_snp.vcek_dir":
    "A directory of VCEK certificates (`*.der`) for offline operation; the one whose hwID and TCB " +
    "match the report is used. Without it VCEKs are fetched from `kds_url` and cached.",
  "trust.sev_snp.kds_url": "AMD KDS (or a mirror) base URL for VCEKs (default: AMD's KDS).",

  upstream: "How upstreams are reached.",
  "upstream.client":
    "`http1`: the gateway's own HTTP/1.1 client (less memory and CPU per request); `fetch`: " +
    "Deno's fetch (HTTP/2, proxy variables; used automatically when a proxy variable is set).",
  "upstream.cache_salt_secret_env":
    "Name of the variable holding the secret (at least 32 characters) that per-key cache salts " +
    "are derived from; give every replica the same one so a key's salt, and its cache hits, " +
    "survive restarts and span replicas. Unset: a random secret per process (still isolating).",

  transparency_log: "The transparency log of receipts, sessions and keysets (C2SP tlog-tiles).",
  "transparency_log.origin":
    "Checkpoint origin and key name: the log's URL prefix without scheme (default `<identity.subject or localhost>/v1/aci/log`).",
  "transparency_log.sweep_interval_ms":
    "How often each replica sequences entries left by a replica that stopped between commit and sequencing.",
  "transparency_log.batch_ms":
    "How long new entries wait for others before one append sequences them together (bounds the inclusion delay).",
  "transparency_log.witnesses": "Witnesses asked to cosign each checkpoint (C2SP tlog-witness).",
  "transparency_log.witnesses[].url":
    "The witness's submission prefix (`add-checkpoint` is posted under it).",
  "transparency_log.witnesses[].vkey": "The witness's cosigner verifier key (type 0x04).",
  "transparency_log.required_cosignatures":
    "Cosignatures a checkpoint needs before it is served (0: served at once).",
  receipts: "Signed receipts.",
  "receipts.retention_days": "How long receipts are kept.",
  "receipts.refusal_retention_days":
    "How long receipts of refusals (nothing forwarded upstream) are kept.",
  "receipts.refusal_budget":
    "Refusals of one key per window that get their own receipt; the rest of the window share one " +
    "receipt that counts them.",
  "receipts.refusal_window_seconds": "The window of `refusal_budget`.",

  tiers: "Rate limits per key tier.",
  "tiers.free": "Limits of `free` keys.",
  "tiers.free.rpm":
    "Requests per minute: a token bucket of this size, refilled continuously at this rate.",
  "tiers.free.tpm":
    "Tokens per minute (prompt tokens plus reserved output), a bucket like `rpm`'s.",
  "tiers.pro": "Limits of `pro` keys.",
  "tiers.pro.rpm": "Requests per minute.",
  "tiers.pro.tpm": "Tokens per minute.",
  "tiers.enterprise": "Limits of `enterprise` keys.",
  "tiers.enterprise.rpm": "Requests per minute.",
  "tiers.enterprise.tpm": "Tokens per minute.",

  cors: "Browser access (CORS).",
  "cors.allowed_origins":
    "Origins (`https://app.example.com`, no path) whose scripts may call the API, or `*` for any; " +
    "none by default. Preflights are granted for these only; credentials are never allowed (keys " +
    "are bearer headers), and `x-receipt-id`, `X-ACI-*`, `Server-Timing` and the rate-limit " +
    "headers are exposed to scripts.",

  providers: "Upstream providers (at least one).",
  "providers[].name": "Unique name (lowercase letters, digits, `-`, `_`); routes refer to it.",
  "providers[].base_url": "The upstream's OpenAI-compatible base URL (e.g. `https://…/v1`).",
  "providers[].api_key_env":
    "Name of the environment variable holding the upstream credential (never the credential " +
    "itself). A named variable that is unset or empty stops start-up; a provider that takes no " +
    "credential omits this field.",
  "providers[].zdr":
    "The provider retains no data (zero data retention); ZDR-only requests need it.",
  "providers[].priority": "Routing preference: higher first.",
  "providers[].timeout_ms": "Upstream request timeout.",
  "providers[].native_formats":
    "Client formats the upstream serves natively (`messages`, `responses`), forwarded untranslated.",
  "providers[].confidential":
    "Present for a confidential (TEE) upstream: verified before any prompt is sent to it.",
  "providers[].confidential.verifier":
    "`dstack-tdx` (dstack TDX evidence), `aci` (an ACI gateway's report), `sev-snp` (an AMD " +
    "SEV-SNP report binding the TLS key), `near-ai` (NEAR AI Cloud's gateway and model CVMs), " +
    "`tinfoil` (a Tinfoil enclave and its Sigstore-published release), `pinned` (operator-pinned " +
    "TLS key, no hardware evidence), `dev` (development configuration only).",
  "providers[].confidential.spki_sha256": "Pinned SPKI SHA-256 (hex) for the `pinned` verifier.",
  "providers[].confidential.tls_ca_pem":
    "PEM trust anchors for the upstream's TLS certificate (default: system roots).",
  "providers[].confidential.allowed_mrtd": "MRTD values (hex) that make `os_known_good` asserted.",
  "providers[].confidential.allowed_compose_hashes":
    "dstack compose hashes (hex) that make `serving_software_known_good` asserted.",
  "providers[].confidential.session_ttl_seconds":
    "Attested-session lifetime; never beyond the evidence's own validity.",
  "providers[].confidential.allow_unverified":
    "Operator opt-out of fail-closed routing: prompts may reach this upstream without a current " +
    "verified session (warned at start-up and on every use; never satisfies `aci_verified`).",
  "providers[].confidential.dev_counts_for_aci_verified":
    "Development switch (dev verifier only): a dev session satisfies `aci_verified`, and its " +
    "claims say so.",
  "providers[].confidential.reverify_margin_seconds": "Re-verify this long before expiry.",
  "providers[].confidential.tdx":
    "TDX policy of the `dstack-tdx` and `aci` verifiers (docs/decisions/tdx-tcb-policy.md).",
  "providers[].confidential.tdx.accepted_tcb_statuses":
    "Intel TCB statuses a quote may have and still verify (default: all of `UpToDate`, " +
    "`SWHardeningNeeded`, `ConfigurationNeeded`, `ConfigurationAndSWHardeningNeeded`, `OutOfDate`, " +
    "`OutOfDateConfigurationNeeded`, `TDRelaunchAdvised`, `TDRelaunchAdvisedConfigurationNeeded`). " +
    "`NotSupported` (no matching TCB level, unknown TDX module) and `Revoked` always fail.",
  "providers[].confidential.tdx.allow_sept_ve_enabled":
    "Accept TDs with SEPT_VE_DISABLE = 0, as Azure TDX VMs run (default false: they fail the TD " +
    "attributes check; docs/decisions/azure-tdx-sept-ve.md). DEBUG = 1 always fails.",
  "providers[].confidential.measurement_policy":
    "Measurement policy (docs/decisions/measurement-policy.md): a signed, versioned accept-list; the upstream gets no prompt unless its measurements match an open entry.",
  "providers[].confidential.measurement_policy.file":
    "Signed policy file loaded at start-up (verified against `trust.measurement_policy_keys`); newer versions arrive through `PUT /admin/v1/measurement-policies/{provider}`.",
  "providers[].confidential.measurement_policy.required":
    "Fail closed while no policy is installed for this upstream.",
  "providers[].confidential.measurement_policy.warn_before_seconds":
    "Show an upstream on `/healthz`, in `gateway_upstream_fail_closed_in_seconds` and in the log this long before its policy entry closes or its evidence expires.",
  "providers[].confidential.near_ai": "Settings of the `near-ai` verifier (NEAR AI Cloud).",
  "providers[].confidential.near_ai.model":
    "The `model` whose CVMs `/v1/attestation/report` attests with the gateway's; absent: the gateway CVM only.",
  "providers[].confidential.tinfoil":
    "Settings of the `tinfoil` verifier: the release whose Sigstore-published measurement the enclave must run.",
  "providers[].confidential.tinfoil.repo":
    "GitHub repository (`owner/name`) whose workflow signs the release.",
  "providers[].confidential.tinfoil.trusted_root_json":
    "Sigstore trusted root (JSON text) the release bundle is verified against, offline.",
  "providers[].confidential.tinfoil.oidc_issuer": "OIDC issuer of the signing certificate.",
  "providers[].confidential.tinfoil.workflow_ref_prefix":
    "Only workflow refs under this prefix sign releases.",
  "providers[].confidential.tinfoil.release_bundle_json":
    "The release's Sigstore bundle (JSON text) for enclaves that serve a bare attestation document.",
  "providers[].confidential.tinfoil.attestation_path": "Where the enclave serves its attestation.",
  "providers[].confidential.sev_snp": "Policy of the `sev-snp` verifier.",
  "providers[].confidential.sev_snp.allowed_measurements":
    "SNP MEASUREMENT values (hex) that make `os_known_good` asserted.",
  "providers[].confidential.sev_snp.min_tcb":
    "Minimum REPORTED_TCB: `tcb_up_to_date` is asserted when every component is at least this, " +
    "refuted otherwise (unknown when unset).",
  "providers[].confidential.sev_snp.require_min_tcb":
    "Make `min_tcb` a verification requirement: a report whose REPORTED_TCB is below it gets no " +
    "session and no prompt (default false: only `tcb_up_to_date` is refuted).",
  "providers[].confidential.sev_snp.min_tcb.fmc":
    "Minimum FMC SPL (Turin only; ignored otherwise).",
  "providers[].confidential.sev_snp.min_tcb.bootloader": "Minimum boot loader SPL.",
  "providers[].confidential.sev_snp.min_tcb.tee": "Minimum PSP OS (TEE) SPL.",
  "providers[].confidential.sev_snp.min_tcb.snp": "Minimum SNP firmware SPL.",
  "providers[].confidential.sev_snp.min_tcb.microcode": "Minimum microcode SPL.",
  "providers[].confidential.require_gpu":
    "Fail verification unless the upstream's NVIDIA GPU evidence passes every check " +
    "(`gpu_attested` hardware_proven); no prompt reaches it otherwise, whatever `allow_unverified` says.",
  "providers[].vendor": "Vendor label for the legacy `GET /v1/models/<vendor>` listing.",
  "providers[].cache_salt":
    "The upstream takes vLLM's `cache_salt`: each request carries a salt derived from its API key " +
    "(keyed HMAC), so its prefix cache is never shared across keys (CVE-2025-46570). Clients may " +
    "not send a salt of their own.",

  models: "Chat models in the catalog.",
  "models[].id": "`<provider>/<model>` id clients send.",
  "models[].name": "Display name.",
  "models[].aliases": "Other ids (`<vendor>/<model>`) accepted for this model.",
  "models[].created": "Unix time shown in `/v1/models`.",
  "models[].context_length": "Context window in tokens.",
  "models[].max_output_length": "Largest output in tokens.",
  "models[].input_modalities": "Accepted input kinds.",
  "models[].output_modalities": "Produced output kinds.",
  "models[].pricing": "Price per token, in credits.",
  "models[].pricing.prompt": "Credits per prompt token.",
  "models[].pricing.completion": "Credits per completion token.",
  "models[].pricing.input_cache_read": "Credits per cached prompt token.",
  "models[].supported_parameters":
    "Request parameters the model accepts; exactly one of `max_tokens` / `max_completion_tokens`.",
  "models[].supported_features": "Feature labels shown in the catalog (`tools`, `reasoning`, …).",
  "models[].tokenizer":
    "BPE encoding for token limits, estimates and `count_tokens` (`o200k_base`, `cl100k_base`); " +
    "absent: `o200k_base`, the documented fallback.",
  "models[].strict_token_parameter":
    "true: a chat request naming the token parameter the model does not take (`max_tokens` / " +
    "`max_completion_tokens`) is the spec's 400; default: it is renamed to the model's.",
  "models[].routes": "Where the model is served, tried in provider priority order.",
  "models[].routes[].provider": "A provider's `name`.",
  "models[].routes[].model": "The model name the upstream expects.",
  "models[].routes[].unsupported_parameters":
    "Request parameters this upstream refuses (e.g. `n`, refused only above 1). The catalog " +
    "advertises a parameter only when every route takes it; a request using one gets a 400 naming it.",

  embedding_models: "Embedding models in the catalog.",
  "embedding_models[].id": "`<provider>/<model>` id clients send.",
  "embedding_models[].name": "Display name.",
  "embedding_models[].created": "Unix time shown in `/v1/models`.",
  "embedding_models[].input_modalities": "Accepted input kinds.",
  "embedding_models[].default_dimensions": "Vector size when the request names none.",
  "embedding_models[].dimensions_range":
    "Inclusive `[min, max]` of `dimensions` accepted; absent = the parameter is not supported.",
  "embedding_models[].max_input_tokens": "Largest input per item, in tokens.",
  "embedding_models[].tokenizer":
    "BPE encoding for input limits and estimates; absent: `o200k_base`.",
  "embedding_models[].pricing": "Price per token, in credits.",
  "embedding_models[].pricing.prompt": "Credits per input token.",
  "embedding_models[].routes": "Where the model is served.",
  "embedding_models[].routes[].provider": "A provider's `name`.",
  "embedding_models[].routes[].model": "The model name the upstream expects.",
};
