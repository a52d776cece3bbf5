/**
 * Health: `GET /healthz` answers anyone with only `ok`, `degraded` or
 * `unavailable` (503); the detail (each confidential upstream's verification:
 * session ids, TLS key hashes, failure reasons) is for operators, shown with
 * the operator token on `/healthz` or at `GET /admin/v1/health`.
 */
import { jsonResponse } from "../http/mod.ts";
import type { OperatorAuth } from "../operator/mod.ts";

/** What health needs (the gateway's context satisfies it). */
export interface HealthDeps {
  config: { providers: readonly { name: string; confidential?: unknown }[] };
  verification(provider: string): { verified: boolean } | null;
  /** Operator view of every confidential upstream's verification. */
  verificationSnapshot(): Record<string, unknown>;
  /** null when no operator token is configured. */
  operator: OperatorAuth | null;
  /** The live configuration's version (operator view). */
  configControl?: { current(): { version: number; digest: string; applied_at: string } };
}

export type HealthStatus = "ok" | "degraded" | "unavailable";

/**
 * ok: every confidential upstream verified; degraded: some are not;
 * unavailable: no provider can take a request (all confidential, none verified).
 */
export function healthStatus(ctx: HealthDeps): HealthStatus {
  const providers = ctx.config.providers;
  const confidential = providers.filter((p) => p.confidential);
  const verified = confidential.filter((p) => ctx.verification(p.name)?.verified === true);
  if (verified.length === confidential.length) return "ok";
  if (verified.length === 0 && confidential.length === providers.length) return "unavailable";
  return "degraded";
}

/** The operator view: the status, the unverified confidential upstreams by name, and each one's state. */
export function healthDetail(ctx: HealthDeps): Record<string, unknown> {
  const failing = ctx.config.providers
    .filter((p) => p.confidential && ctx.verification(p.name)?.verified !== true)
    .map((p) => p.name);
  const upstreams = ctx.verificationSnapshot();
  // Upstreams that will fail closed soon (policy entry closing, evidence expiring): shown before.
  const warned = Object.entries(upstreams).filter(([, v]) =>
    typeof v === "object" && v !== null && "warnings" in v
  ).map(([name]) => name);
  return {
    status: healthStatus(ctx),
    ...(failing.length > 0 ? { unverified_upstreams: failing } : {}),
    ...(warned.length > 0 ? { fail_closed_soon: warned } : {}),
    upstreams,
    ...(ctx.configControl ? { config: configVersion(ctx.configControl.current()) } : {}),
  };
}

function configVersion(v: { version: number; digest: string; applied_at: string }) {
  return { version: v.version, digest: v.digest, applied_at: v.applied_at };
}

export function healthz(req: Request, ctx: HealthDeps): Response {
  const status = healthStatus(ctx);
  const code = status === "unavailable" ? 503 : 200;
  const operator = ctx.operator?.check(req.headers.get("authorization")) ?? false;
  return jsonResponse(operator ? healthDetail(ctx) : { status }, code, {
    "cache-control": "no-store",
  });
}
