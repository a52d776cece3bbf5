/**
 * Builds a running gateway's context and handler from a validated
 * configuration and the outside world's handles (KV, clock, fetch, entropy,
 * log sink, environment lookup). main.ts and the tests both call this, so
 * tests exercise exactly what production runs.
 */
import { GatewayError } from "../http/errors.ts";
import { StreamTicker, tickPeriodMs } from "../handlers/stream_ticker.ts";
import type { GatewayConfig } from "../config/schema.ts";
import { Catalog } from "../catalog/catalog.ts";
import { createAuthenticator } from "../accounts/keys.ts";
import { createAdmitter } from "../accounts/admission.ts";
import { PreAdmission } from "../accounts/pre_admission.ts";
import { BodyBudget } from "../http/body_budget.ts";
import { GroupCommitter } from "../store/group_commit.ts";
import { createIdentity, type Identity } from "../attestation/identity.ts";
import { createReceiptService } from "../receipts/service.ts";
import { createApp, type ExtraRoutes } from "./app.ts";
import type { GatewayContext, LogLine } from "../handlers/context.ts";
import type { RequestInfo } from "../handlers/pipeline.ts";
import type { VerificationState } from "../routing/select.ts";
import type { UpstreamFetch } from "../upstream/forward.ts";
import type { QuoteProvider } from "../attestation/quote_provider.ts";
import type { SourceProvenance } from "../attestation/provenance.ts";
import { createReportService } from "../attestation/reports.ts";
import { createReplicaRegistry } from "../attestation/replicas.ts";
import { recoverHolds } from "../accounts/holds.ts";
import { bytesToHex } from "../aci/hex.ts";
import { createSessionStore } from "../sessions/store.ts";
import { createVerificationManager, type VerificationManager } from "../sessions/manager.ts";
import type { UpstreamVerifier, VerifierDeps } from "../sessions/types.ts";
import type { ProviderConfig } from "../config/schema.ts";
import type { Candidate } from "../routing/select.ts";
import type { UpstreamTransport } from "../upstream/transport.ts";
import { createReplayGuard } from "../e2ee/replay.ts";
import { hexToBytes } from "../aci/hex.ts";

export interface OutsideWorld {
  kv: Deno.Kv;
  now: () => number;
  /** Monotonic ms (`performance.now`): phase timings, stream deadlines, admission leases. */
  monotonic: () => number;
  /** Retry and lease jitter in [0, 1) (`Math.random`). */
  random: () => number;
  fetch: UpstreamFetch;
  randomBytes: (n: number) => Uint8Array;
  /** Request and trace ids (`crypto.randomUUID`). */
  randomUUID: () => string;
  log: (line: LogLine) => void;
  /** Environment lookup for upstream credentials (`api_key_env`). */
  env: (name: string) => string | undefined;
  /** Where TEE quotes come from (configfs-tsm, or the loudly non-hardware dev provider). */
  quotes: QuoteProvider;
  /** From the build manifest; null when unknown. */
  provenance: SourceProvenance | null;
}

/** What the gateway declares it serves (in every report's `service_capabilities`). */
export const SERVICE_CAPABILITIES = {
  serving: "aggregator",
  supported_e2ee_versions: ["2"],
  endpoints: [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/messages",
    "/v1/responses",
  ],
  formats: [
    "openai.chat_completions",
    "openai.completions",
    "openai.embeddings",
    "anthropic.messages",
    "openai.responses",
  ],
  receipts: {
    signature_algorithms: ["ed25519"],
    legacy_signature_algorithms: ["ecdsa", "ed25519"],
  },
  attested_sessions: true,
};

export interface Gateway {
  ctx: GatewayContext;
  handler: (req: Request) => Promise<Response>;
  identity: Identity;
  /** Resolves once this replica's first attestation is announced and upstreams had a first verification. */
  ready: Promise<void>;
  /** Verification of confidential upstreams (null when there is none or no verifier). */
  manager: VerificationManager | null;
  /** Flush durable writes and stop background work. */
  close(): Promise<void>;
}

export function assembleGateway(
  config: GatewayConfig,
  world: OutsideWorld,
  opts: {
    extraRoutes?: ExtraRoutes;
    identity?: Identity;
    /** How confidential upstreams are verified (main.ts passes the real verifiers). */
    verifiers?: { verifierFor: (p: ProviderConfig) => UpstreamVerifier; deps: VerifierDeps };
    /** SPKI digests of the TLS keys this gateway terminates with (listed in the keyset). */
    tlsSpkiSha256s?: { spki_sha256: string; domain?: string }[];
    /** Pinned and private-CA upstream connections (main.ts: the one upstream transport). */
    transport?: Pick<UpstreamTransport, "pinned" | "dropPinned" | "withCa">;
  } = {},
): Gateway {
  const { kv, now } = world;
  const catalog = new Catalog(config);
  const identity = opts.identity ?? createIdentity({
    subject: config.identity.subject,
    ttlSeconds: config.identity.keyset_ttl_seconds,
    now,
    tlsSpkiSha256s: opts.tlsSpkiSha256s,
    e2eeSeed: e2eeSeed(config, world.env),
  });
  const committer = new GroupCommitter(kv, {
    random: world.random,
    onError: (e) => world.log({ level: "error", msg: "durable write failed", error: String(e) }),
  });
  const replicaTtlMs = config.store.replica_ttl_seconds * 1000;
  const replicas = createReplicaRegistry(kv, {
    id: bytesToHex(world.randomBytes(8)),
    ttlMs: replicaTtlMs,
    now,
  });
  const reports = createReportService({
    identity,
    quotes: world.quotes,
    kv,
    provenance: world.provenance,
    capabilities: SERVICE_CAPABILITIES,
    replicas,
    randomBytes: world.randomBytes,
  });
  // Archive every keyset (start-up and rotations) and keep this replica announced.
  const announce = async () => {
    const report = await reports.canonical(null);
    await replicas.announce(report.attestation);
  };
  identity.onRotate((snap) => {
    reports.archive(snap).catch((e) =>
      world.log({ level: "error", msg: "keyset archive failed", error: String(e) })
    );
  });
  // Credits held by replicas that are gone (a crash) go back to their keys.
  let recovering: Promise<void> = Promise.resolve();
  const recover = () =>
    recovering = recoverHolds(kv, { self: replicas.id, live: () => replicas.liveIds() }).then(
      (r) => {
        if (r.instances > 0) {
          world.log({
            level: "info",
            msg: "recovered holds of gone replicas",
            instances: r.instances,
            refunded_nano: r.refundedNano.toString(),
          });
        }
      },
    ).catch((e) => world.log({ level: "error", msg: "hold recovery failed", error: String(e) }));
  const heartbeat = setInterval(() => {
    announce().catch((e) =>
      world.log({ level: "error", msg: "replica announce failed", error: String(e) })
    );
    void recover();
  }, replicaTtlMs / 3);
  // Quota leases are only safe while no other replica shares the store (see
  // accounts/leases.ts); the replica list is re-read at most twice a second.
  let sole: { at: number; value: Promise<boolean> } | null = null;
  const soleReplica = (): Promise<boolean> => {
    const t = now();
    if (sole === null || t - sole.at > 500 || t < sole.at) {
      sole = { at: t, value: replicas.others().then((o) => o.length === 0) };
    }
    return sole.value;
  };
  const sessions = createSessionStore(kv, {
    now,
    receiptRetentionMs: config.receipts.retention_days * 86_400_000,
  });
  let manager: VerificationManager | null = null;
  if (opts.verifiers && config.providers.some((p) => p.confidential)) {
    manager = createVerificationManager({
      providers: config.providers,
      verifierFor: opts.verifiers.verifierFor,
      deps: opts.verifiers.deps,
      store: sessions,
      replicaId: replicas.id,
      now,
      log: world.log,
    });
  }
  const verification = (name: string): VerificationState | null => {
    if (!catalog.providers.get(name)?.confidential) return null;
    return manager?.state(name) ??
      { verified: false, reason: "no upstream verifier is configured" };
  };
  // A verified upstream is only ever reached over its bound key: pinned pools per
  // (provider, SPKI), retired whenever the session they were opened under ends
  // (invalidated, expired and re-verified, or another key).
  const transport = opts.transport;
  const pinnedSession = new Map<string, string>();
  const fetchFor = (c: Candidate): UpstreamFetch => {
    const v = c.verification;
    const name = c.provider.name;
    const session = v?.verified && v.spkiSha256 ? `${v.sessionId}:${v.spkiSha256}` : undefined;
    if (transport && pinnedSession.has(name) && pinnedSession.get(name) !== session) {
      pinnedSession.delete(name);
      transport.dropPinned(name);
    }
    if (v?.verified && v.spkiSha256) {
      if (!transport) throw new GatewayError("unavailable", "no pinned upstream transport");
      pinnedSession.set(name, session!);
      return transport.pinned({
        provider: name,
        spkiSha256: v.spkiSha256,
        ca: c.provider.confidential?.tls_ca_pem,
        onMismatch: () => {
          pinnedSession.delete(name);
          transport.dropPinned(name);
          manager?.invalidate(name, "upstream TLS key does not match its session");
        },
      });
    }
    const pem = c.provider.confidential?.tls_ca_pem;
    if (pem && transport) return transport.withCa(pem);
    return world.fetch;
  };
  for (const p of config.providers) {
    if (p.confidential?.allow_unverified) {
      world.log({
        level: "warn",
        msg: "confidential.allow_unverified is set: this confidential upstream receives " +
          "prompts while unverified (requests without aci_verified)",
        upstream: p.name,
      });
    }
  }
  const credentials = new Map<string, string | undefined>();
  for (const p of config.providers) {
    if (p.api_key_env) credentials.set(p.name, world.env(p.api_key_env));
  }
  const ctx: GatewayContext = {
    config,
    kv,
    catalog,
    auth: createAuthenticator(kv, { now }),
    admitter: createAdmitter(kv, {
      tiers: config.tiers,
      now,
      piggyback: committer,
      monotonic: world.monotonic,
      random: world.random,
      soleReplica: config.store.quota_leases ? soleReplica : undefined,
      holdInstance: replicas.id,
      leaseMaxRequests: config.store.lease_max_requests,
    }),
    committer,
    // #15: a rate-limited key's bodies go unread; bodies being read are bounded in bytes.
    preAdmission: new PreAdmission(now),
    bodyBudget: new BodyBudget({
      global: config.limits.body_bytes_in_flight,
      perKey: config.limits.body_bytes_in_flight_per_key,
    }),
    receipts: createReceiptService(kv, {
      identity,
      now,
      retentionDays: config.receipts.retention_days,
      refusals: {
        budget: config.receipts.refusal_budget,
        windowMs: config.receipts.refusal_window_seconds * 1000,
        retentionMs: config.receipts.refusal_retention_days * 86_400_000,
        write: (ops) => committer.write(ops),
      },
      onError: (e) =>
        world.log({ level: "error", msg: "refusal count write failed", error: String(e) }),
    }),
    identity,
    reports,
    sessions,
    forward: {
      fetchFor,
      credential: (name) => credentials.get(name),
      now,
      bodyLimits: {
        maxBytes: config.limits.max_upstream_body_bytes,
        idleMs: config.limits.upstream_read_idle_ms,
        totalMs: config.limits.upstream_body_timeout_ms,
      },
    },
    e2ee: {
      keyring: () => identity.current().e2ee,
      replay: createReplayGuard(kv, now),
      now,
      randomBytes: world.randomBytes,
    },
    streamTicker: new StreamTicker(
      tickPeriodMs(config.limits.stream_idle_timeout_ms, config.limits.sse_keepalive_ms),
      world.monotonic,
      (e) => world.log({ level: "error", error: `stream deadline check failed: ${String(e)}` }),
    ),
    verification,
    verificationSnapshot: () => manager?.snapshot() ?? {},
    now,
    monotonic: world.monotonic,
    randomBytes: world.randomBytes,
    randomUUID: world.randomUUID,
    log: world.log,
    logRequest: (info: RequestInfo, status: number, outcome?: string) =>
      world.log({
        level: "info",
        request_id: info.requestId,
        trace_id: info.traceId,
        route: info.route ?? null,
        key_id: info.keyId ?? null,
        receipt_id: info.receiptId ?? null,
        model: info.model,
        provider: info.provider,
        status,
        error_code: info.errorCode ?? null,
        outcome: outcome ?? (status < 400 ? "ok" : "refused"),
        // Providers tried, in order, and how each attempt ended (never content).
        attempts: info.attempts ?? [],
        latency_ms: now() - info.started,
        prompt_tokens: info.usage?.prompt_tokens ?? null,
        completion_tokens: info.usage?.completion_tokens ?? null,
        metadata: info.metadata ?? null,
      }),
  };
  // Ready once announced and every confidential upstream had its first verification attempt.
  const ready = Promise.all([announce().then(recover), manager?.start()]).then(() => {});
  const handler = createApp(ctx, opts.extraRoutes);
  return {
    ctx,
    handler,
    identity,
    ready,
    manager,
    async close() {
      clearInterval(heartbeat);
      manager?.stop();
      await ready.catch(() => {});
      await recovering;
      await ctx.admitter.close();
      await ctx.receipts.close().catch(() => {});
      await committer.close();
    },
  };
}

/** The E2EE seed the replicas share (`identity.e2ee_seed_env`: 64 hex characters), if configured. */
function e2eeSeed(
  config: GatewayConfig,
  env: (name: string) => string | undefined,
): Uint8Array | undefined {
  const name = config.identity.e2ee_seed_env;
  if (name === undefined) return undefined;
  const value = env(name);
  if (value === undefined || !/^[0-9a-fA-F]{64}$/.test(value)) {
    throw new Error(`identity.e2ee_seed_env: ${name} must hold 64 hexadecimal characters`);
  }
  return hexToBytes(value);
}
