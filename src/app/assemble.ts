/**
 * Builds a running gateway's context and handler from a validated
 * configuration and the outside world's handles (KV, clock, fetch, entropy,
 * log sink, environment lookup). main.ts and the tests both call this, so
 * tests exercise exactly what production runs.
 */
import {
  type GatewayContext,
  type LogLine,
  requestLogger,
  StreamTicker,
  tickPeriodMs,
} from "../handlers/mod.ts";
import type { GatewayConfig, ProviderConfig } from "../config/mod.ts";
import { Catalog } from "../catalog/mod.ts";
import { FALLBACK_TOKENIZER, prepareTokenizers, TextCounts } from "../tokens/mod.ts";
import {
  createAdmitter,
  FencedError,
  holdFenceKey,
  keyAdmin,
  PreAdmission,
} from "../admission/mod.ts";
import { createAuthenticator, usagePendingKey } from "../keys/mod.ts";
import { BodyBudget, DeadlineWheel } from "../http/mod.ts";
import { DeferredSums, GroupCommitter } from "../store/mod.ts";
import {
  createIdentity,
  createOwnCollateral,
  createReplicaRegistry,
  createReportService,
  type Identity,
  type QuoteProvider,
  type SourceProvenance,
} from "../attestation/mod.ts";
import { createReceiptService } from "../receipts/mod.ts";
import { API_VERSION, type AppHandler, createApp, type ExtraRoutes } from "./app.ts";
import { SERVICE_CAPABILITIES } from "./routes/table.ts";
import { createCacheSalter, createFetchFor, type VerificationState } from "../routing/mod.ts";
import type { UpstreamFetch, UpstreamTransport } from "../upstream/mod.ts";
import { bytesToHex, hexToBytes, keysetEntry } from "../aci/mod.ts";
import {
  type AnswerSignatures,
  type AttesterDeps,
  createAnswerSignatures,
  createSessionStore,
  createVerificationManager,
  type PolicyRegistry,
  type UpstreamAttester,
  type VerificationManager,
} from "../sessions/mod.ts";
import { checkUpstreamModels } from "./upstream_models_check.ts";
import {
  ADMIN_TOKEN_ENV,
  createMetrics,
  type GatewayMetrics,
  operatorAuth,
  type ProcessStats,
} from "../operator/mod.ts";
import { createReplayGuard } from "../e2ee/mod.ts";
import { startReplicaUpkeep } from "./replica_upkeep.ts";
import { createTransparencyLog } from "../tlog/mod.ts";
import { createOtelExport } from "./otel.ts";
import { createLiveConfig, hostWideOnly, type LiveConfig } from "./live_config.ts";
import type { Context } from "@opentelemetry/api";

/** Usage deltas wait at most this long in a replica's pending row before they are applied. */
const USAGE_FLUSH_MS = 1000;
/** Distinct usage counters a pending row holds before the next commit applies them. */
const USAGE_PENDING_ENTRIES = 64;

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
  /** How the transparency log reaches its witnesses (main.ts: the global `fetch`); none: no witnesses. */
  witnessFetch?: (url: string, init: RequestInit) => Promise<Response>;
}

/** What a worker knows of its host (main.ts reads it from the supervisor, src/app/supervisor.ts). */
export interface HostWorker {
  host: string;
  index: number;
  count: number;
  /** Shared by the host's workers unless configured: E2EE keys and cache salts agree across them. */
  e2eeSeed: Uint8Array;
  cacheSalt: Uint8Array;
}

export interface Gateway {
  ctx: GatewayContext;
  /** The request handler; `handler.routes()` lists the route table. */
  handler: AppHandler;
  identity: Identity;
  /** Resolves once this replica's first attestation is announced and upstreams had a first verification. */
  ready: Promise<void>;
  /** Verification of confidential upstreams (null when there is none or no verifier). */
  manager: VerificationManager | null;
  /** The per-answer signature checks' counters (NEAR AI upstreams); absent without them. */
  answerSignatures?: AnswerSignatures;
  /** The start-up check of routes' upstream models against the upstreams' listings (warnings). */
  modelsChecked: Promise<void>;
  /** Providers, models and prices changed without a restart (admin API, SIGHUP). */
  live: LiveConfig;
  /** Flush durable writes and stop background work. */
  close(): Promise<void>;
}

/**
 * Wires every service into the context and the handler. Long by nature: one
 * declaration per service, in dependency order; the pieces with logic of their
 * own live beside it (replica_upkeep.ts); request-time code lives below (routing/fetch_for.ts,
 * handlers/request_log.ts).
 */
export function assembleGateway(
  config: GatewayConfig,
  world: OutsideWorld,
  opts: {
    extraRoutes?: ExtraRoutes;
    identity?: Identity;
    /** How confidential upstreams are verified (main.ts passes the real verifiers). */
    attesters?: {
      attesterFor: (p: ProviderConfig) => UpstreamAttester;
      deps: AttesterDeps;
      /** Measurement policies in force (changed at runtime by the admin API). */
      policies?: PolicyRegistry;
    };
    /** SPKI digests of the TLS keys this gateway terminates with (listed in the keyset). */
    tlsSpkiSha256s?: { spki_sha256: string; domain?: string }[];
    /** Fetch for confidential upstreams not (yet) pinned, e.g. one trusting their private CA. */
    confidentialFetch?: (p: ProviderConfig) => UpstreamFetch;
    /** Metrics to record into (default: a fresh registry; the bench passes a no-op to compare). */
    metrics?: GatewayMetrics;
    /** Add prom-client's process metrics (CPU, RSS, open fds, event-loop lag) to the default registry. */
    processMetrics?: boolean;
    /** Whether receipts, sessions and keysets enter the transparency log (default true; the bench compares). */
    logEntries?: boolean;
    /** Scrape-time process figures (main.ts), served when `processMetrics` is off. */
    processStats?: () => ProcessStats;
    /** The runtime's version, for `gateway_build_info`. */
    runtimeVersion?: string;
    /** With OpenTelemetry on (`OTEL_DENO=true`): where the exported per-request line goes. */
    otelLog?: (line: LogLine) => void;
    /** Pinned and private-CA upstream connections (main.ts: the one upstream transport). */
    transport?: Pick<UpstreamTransport, "pinned" | "dropPinned" | "withCa">;
    /** One worker of a host running `serve.workers` > 1 (docs/decisions/workers.md). */
    worker?: HostWorker;
  } = {},
): Gateway {
  const worker = opts.worker;
  const { kv, now } = world;
  const catalog = new Catalog(config);
  // The encodings the catalog names, built before the first request (the others never are).
  prepareTokenizers(
    new Set(
      [...config.models, ...config.embedding_models].map((m) => m.tokenizer ?? FALLBACK_TOKENIZER),
    ),
  );
  // Throws on a weak token: the gateway does not start with a guessable operator token.
  const operator = operatorAuth(world.env(ADMIN_TOKEN_ENV));
  const metrics = opts.metrics ?? createMetrics({
    now,
    confidential: config.providers.filter((p) => p.confidential).map((p) => p.name),
    verification: (name) => {
      const v = verification(name);
      return v === null ? null : v.verified ? { verified: true, sessionId: v.sessionId } : v;
    },
    // Read at scrape time, when ctx exists.
    openStreams: () => ctx.streamTicker.size,
    promptCounting: () => ctx.promptCounts.totals,
    failClosedIn: (name) => manager?.failClosedIn(name) ?? null,
    processMetrics: opts.processMetrics,
    processStats: opts.processStats,
    build: {
      api_version: API_VERSION,
      deno: opts.runtimeVersion ?? "unknown",
      source_digest: world.provenance?.image_provenance.source_digest ?? "unknown",
      source_commit: world.provenance?.image_provenance.source_commit ?? "unknown",
    },
    // Every series of a worker says which one it is: a scrape reaches one worker.
    defaultLabels: opts.worker ? { worker: String(opts.worker.index) } : undefined,
  });
  const logOrigin = config.transparency_log.origin ??
    `${config.identity.subject ?? "localhost"}/v1/aci/log`;
  const identity = opts.identity ?? createIdentity({
    logOrigin,
    subject: config.identity.subject,
    ttlSeconds: config.identity.keyset_ttl_seconds,
    now,
    tlsSpkiSha256s: opts.tlsSpkiSha256s,
    e2eeSeed: e2eeSeed(config, world.env) ?? worker?.e2eeSeed,
  });
  // A worker's id names its host, so the sole-replica test counts hosts (replica_upkeep.ts).
  const replicaId = worker
    ? `${worker.host}.${worker.index}.${bytesToHex(world.randomBytes(4))}`
    : bytesToHex(world.randomBytes(8));
  const deadlines = new DeadlineWheel(world.monotonic);
  const tlog = createTransparencyLog({
    kv,
    after: deadlines.after,
    origin: logOrigin,
    now,
    randomBytes: world.randomBytes,
    sign: (body) => {
      const signer = identity.current().log;
      if (signer.name !== logOrigin) {
        throw new Error("the identity's log key is not named for the origin");
      }
      return signer.sign(body);
    },
    witnesses: config.transparency_log.witnesses,
    requiredCosignatures: config.transparency_log.required_cosignatures,
    witnessFetch: world.witnessFetch,
    sweepIntervalMs: config.transparency_log.sweep_interval_ms,
    batchMs: config.transparency_log.batch_ms,
    log: world.log,
    // One appender per host: worker 0 (the others' entries wait for its sweep).
    append: worker === undefined || worker.index === 0,
    // Appends carry the receipts queued meanwhile (one commit instead of two). Only used
    // by appends, which begin after start-up, once `committer` below exists.
    lane: {
      exclusive: (f) => committer.exclusive(f),
      borrow: (mutations, bytes) => committer.borrow(mutations, bytes),
      fence: holdFenceKey(replicaId),
    },
  });
  const logEntries = opts.logEntries ?? true;
  const committer = new GroupCommitter(kv, {
    // Usage totals and per-day usage: one row per commit instead of eight sums
    // (docs/decisions/deferred-usage-sums.md).
    deferred: new DeferredSums({
      row: usagePendingKey(replicaId),
      flushMs: USAGE_FLUSH_MS,
      maxEntries: USAGE_PENDING_ENTRIES,
      now,
    }),
    onDurable: () => tlog.kick(),
    random: world.random,
    // #25 item 12: once another replica recovered this one's holds, nothing more commits.
    fence: { key: holdFenceKey(replicaId), error: () => new FencedError(replicaId) },
    onError: (e) => {
      metrics.kvError();
      world.log({ level: "error", msg: "durable write failed", error: String(e) });
    },
    onCommit: (n) => metrics.groupCommit(n),
    onRetry: () => metrics.kvRetry(),
  });
  const replicaTtlMs = config.store.replica_ttl_seconds * 1000;
  const replicas = createReplicaRegistry(kv, {
    id: replicaId,
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
  // Keysets archived, this replica announced, crashed replicas' holds recovered.
  const upkeep = startReplicaUpkeep({
    kv,
    identity,
    reports,
    replicas,
    ttlMs: replicaTtlMs,
    now,
    log: world.log,
    logKeyset: logEntries
      ? (digest, report) => tlog.enqueue(keysetEntry(digest, report))
      : undefined,
    host: worker?.host,
  });
  const sessions = createSessionStore(kv, {
    log: logEntries ? tlog : undefined,
    now,
    receiptRetentionMs: config.receipts.retention_days * 86_400_000,
    replicas: { self: replicas.id, live: () => replicas.liveIds() },
  });
  let manager: VerificationManager | null = null;
  if (opts.attesters && config.providers.some((p) => p.confidential)) {
    manager = createVerificationManager({
      providers: config.providers,
      attesterFor: opts.attesters.attesterFor,
      deps: opts.attesters.deps,
      store: sessions,
      replicaId: replicas.id,
      now,
      log: world.log,
      policies: opts.attesters.policies,
    });
  }
  const verification = (name: string): VerificationState | null => {
    if (!catalog.providers.get(name)?.confidential) return null;
    return manager?.state(name) ??
      { verified: false, reason: "no upstream verifier is configured" };
  };
  const fetchFor = createFetchFor({
    transport: opts.transport,
    fetch: world.fetch,
    invalidate: (name, reason) => manager?.invalidate(name, reason),
  });
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
  const admitter = createAdmitter(kv, {
    tiers: config.tiers,
    now,
    piggyback: committer,
    monotonic: world.monotonic,
    random: world.random,
    soleReplica: config.store.quota_leases ? upkeep.soleReplica : undefined,
    holdInstance: replicas.id,
    leaseMaxRequests: config.store.lease_max_requests,
    leaseParts: worker?.count,
  });
  // NEAR AI upstreams sign each answer; checked after it against the session's attested keys.
  const answerSignatures = manager && opts.attesters
    ? createAnswerSignatures({
      providers: config.providers,
      session: (name) => manager!.current(name),
      invalidate: (name, reason) => manager!.invalidate(name, reason),
      deps: opts.attesters.deps,
      credential: (name) => credentials.get(name),
      log: world.log,
    })
    : null;
  const otel = opts.otelLog ? createOtelExport(opts.otelLog) : null;
  const ctx: GatewayContext = {
    config,
    kv,
    catalog,
    auth: createAuthenticator(kv, { now }),
    admitter,
    committer,
    // #15: a rate-limited key's bodies go unread; bodies being read are bounded in bytes.
    // #25: a key that cannot pay, or whose refusals fill its bucket, is refused unread too.
    preAdmission: new PreAdmission(now, {
      mayPay: (k) => admitter.mayPay(k),
      tiers: config.tiers,
    }),
    bodyBudget: new BodyBudget({
      global: config.limits.body_bytes_in_flight,
      perKey: config.limits.body_bytes_in_flight_per_key,
    }),
    deadlines,
    // Per process: an entry only saves a recount, so workers need not share them.
    promptCounts: new TextCounts(world.randomBytes(32)),
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
      log: logEntries ? tlog : undefined,
    }),
    tlog,
    identity,
    reports,
    reportCollateral: createOwnCollateral({
      kv,
      now,
      tdx: opts.attesters?.deps.tdx.collateral,
      sevSnp: opts.attesters?.deps.sevSnp,
    }),
    sessions,
    forward: {
      fetchFor,
      credential: (name) => credentials.get(name),
      onConfigRefusal: (r) =>
        world.log({
          level: "error",
          msg: "upstream refused the gateway's configuration",
          provider: r.provider,
          upstream_model: r.upstreamModel,
          upstream_status: r.status,
          upstream_message: r.detail,
          fix: "check this provider's base_url and the route's upstream model name",
        }),
      now,
      bodyLimits: {
        after: deadlines.after,
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
    measurementPolicies: opts.attesters?.policies ?? null,
    ...(answerSignatures ? { answered: answerSignatures.answered } : {}),
    keyAdmin: keyAdmin({ kv, now, tiers: config.tiers }),
    operator,
    metrics,
    cacheSalt: createCacheSalter(cacheSaltSecret(config, world, worker?.cacheSalt)),
    now,
    monotonic: world.monotonic,
    randomBytes: world.randomBytes,
    randomUUID: world.randomUUID,
    log: world.log,
    logRequest: requestLogger({
      metrics,
      now,
      emit: otel
        ? (line, observed, ms, info) =>
          otel.request(observed, ms, line, info.traceContext as Context)
        : (line) => world.log(line),
    }),
    traceContext: otel?.capture,
  };
  const live = createLiveConfig({ ctx, credentials, env: world.env, log: world.log, now });
  // A worker of several cannot apply an admin PUT host-wide: refused (SIGHUP changes all).
  ctx.configControl = worker && worker.count > 1 ? hostWideOnly(live, worker.count) : live;
  // Ready once announced and every confidential upstream had its first verification attempt.
  const ready = Promise.all([upkeep.announce().then(upkeep.recover), manager?.start()]).then(
    () => {},
  );
  const handler = createApp(ctx, opts.extraRoutes);
  // Not awaited by `ready`: a slow upstream listing must not hold up serving.
  const stopModelsCheck = new AbortController();
  const modelsChecked = checkUpstreamModels(config, {
    fetchFor: (p) =>
      p.confidential?.tls_ca_pem && opts.transport
        ? opts.transport.withCa(p.confidential.tls_ca_pem)
        : world.fetch,
    credential: (name) => credentials.get(name),
    log: world.log,
    timeoutMs: 5_000,
    signal: stopModelsCheck.signal,
  }).then(() => {}, () => {});
  return {
    ctx,
    handler,
    identity,
    ready,
    manager,
    ...(answerSignatures ? { answerSignatures } : {}),
    modelsChecked,
    live,
    async close() {
      const upkeepClosed = upkeep.close(); // the heartbeat stops at once
      manager?.stop();
      await ready.catch(() => {});
      stopModelsCheck.abort();
      await modelsChecked;
      await upkeepClosed;
      await ctx.admitter.close();
      await ctx.receipts.close().catch(() => {});
      await committer.close();
      await tlog.settle().catch(() => {});
      await tlog.close();
      deadlines.close(); // its runtime timer, kept unreferenced while idle
    },
  };
}

/**
 * The secret cache salts derive from: the configured variable's bytes (shared by
 * replicas), else random bytes of this process (still isolating, never shared).
 */
function cacheSaltSecret(
  config: GatewayConfig,
  world: OutsideWorld,
  hostSecret?: Uint8Array,
): Uint8Array {
  const name = config.upstream.cache_salt_secret_env;
  if (name === undefined) return hostSecret ?? world.randomBytes(32);
  const value = world.env(name);
  if (value === undefined || value.length < 32) {
    throw new Error(`upstream.cache_salt_secret_env: ${name} must hold at least 32 characters`);
  }
  return new TextEncoder().encode(value);
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
