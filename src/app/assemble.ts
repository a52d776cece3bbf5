/**
 * Builds a running gateway's context and handler from a validated
 * configuration and the outside world's handles (KV, clock, fetch, entropy,
 * log sink, environment lookup). main.ts and the tests both call this, so
 * tests exercise exactly what production runs.
 */
import type { GatewayConfig } from "../config/schema.ts";
import { Catalog } from "../catalog/catalog.ts";
import { createAuthenticator } from "../accounts/keys.ts";
import { createAdmitter } from "../accounts/admission.ts";
import { GroupCommitter } from "../store/group_commit.ts";
import { createIdentity, type Identity } from "../attestation/identity.ts";
import { createReceiptService } from "../receipts/service.ts";
import { createApp, type ExtraRoutes } from "./app.ts";
import type { GatewayContext, LogLine } from "./context.ts";
import type { RequestInfo } from "../handlers/pipeline.ts";
import type { VerificationState } from "../routing/select.ts";
import type { UpstreamFetch } from "../upstream/forward.ts";

export interface OutsideWorld {
  kv: Deno.Kv;
  now: () => number;
  fetch: UpstreamFetch;
  randomBytes: (n: number) => Uint8Array;
  log: (line: LogLine) => void;
  /** Environment lookup for upstream credentials (`api_key_env`). */
  env: (name: string) => string | undefined;
}

export interface Gateway {
  ctx: GatewayContext;
  handler: (req: Request) => Promise<Response>;
  identity: Identity;
  /** Flush durable writes and stop background work. */
  close(): Promise<void>;
}

export function assembleGateway(
  config: GatewayConfig,
  world: OutsideWorld,
  opts: {
    extraRoutes?: ExtraRoutes;
    verification?: (provider: string) => VerificationState | null;
    identity?: Identity;
  } = {},
): Gateway {
  const { kv, now } = world;
  const catalog = new Catalog(config);
  const identity = opts.identity ?? createIdentity({
    subject: config.identity.subject,
    ttlSeconds: config.identity.keyset_ttl_seconds,
    now,
  });
  const committer = new GroupCommitter(kv, {
    onError: (e) => world.log({ level: "error", msg: "durable write failed", error: String(e) }),
  });
  const credentials = new Map<string, string | undefined>();
  for (const p of config.providers) {
    if (p.api_key_env) credentials.set(p.name, world.env(p.api_key_env));
  }
  const ctx: GatewayContext = {
    config,
    kv,
    catalog,
    auth: createAuthenticator(kv, { now }),
    admitter: createAdmitter(kv, { tiers: config.tiers, now }),
    committer,
    receipts: createReceiptService(kv, {
      identity,
      now,
      retentionDays: config.receipts.retention_days,
    }),
    identity,
    forward: {
      fetchFor: () => world.fetch,
      credential: (name) => credentials.get(name),
      now,
    },
    verification: opts.verification ??
      ((name) =>
        catalog.providers.get(name)?.confidential
          ? { verified: false, reason: "upstream verification is not available in this build" }
          : null),
    now,
    randomBytes: world.randomBytes,
    log: world.log,
    logRequest: (info: RequestInfo & { route?: string }, status: number, outcome?: string) =>
      world.log({
        level: "info",
        request_id: info.requestId,
        trace_id: info.traceId,
        route: info.route ?? null,
        model: info.model,
        provider: info.provider,
        status,
        outcome: outcome ?? null,
        latency_ms: now() - info.started,
        prompt_tokens: info.usage?.prompt_tokens ?? null,
        completion_tokens: info.usage?.completion_tokens ?? null,
        metadata: info.metadata ?? null,
      }),
  };
  const handler = createApp(ctx, opts.extraRoutes);
  return {
    ctx,
    handler,
    identity,
    close: () => committer.close(),
  };
}
