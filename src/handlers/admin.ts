/**
 * The admin HTTP API under `/admin/v1/…`, for operators: keys (create, list,
 * show, credit, revoke, set tier and limits), usage per key and model over a
 * day range, health detail and the Prometheus metrics. Authorised by the
 * operator token (operator/admin_token.ts); without a configured token every
 * path answers 404, as if the API did not exist. Every call is logged as one
 * `admin` line (action, target key id, status; never the token or a key).
 * The key operations are admission/key_admin.ts, the same code `deno task
 * keys` runs.
 */
import type { z } from "zod";
import {
  asGatewayError,
  badParam,
  GatewayError,
  jsonResponse,
  parseJsonBody,
  readBody,
  requireJsonContentType,
} from "../http/mod.ts";
import { parseWith } from "../formats/mod.ts";
import { CreateKeyBody, CreditBody, KeyArgumentError, UpdateKeyBody } from "../admission/mod.ts";
import { isKeyId } from "../keys/mod.ts";
import type { GatewayMetrics } from "../operator/mod.ts";
import { type HealthDeps, healthDetail } from "./health.ts";
import { type KeyInfoDeps, rangeFromQuery } from "./key_info.ts";
import type { PolicyRegistry } from "../sessions/mod.ts";

const MAX_ADMIN_BODY = 64 * 1024;
/** A policy of 1000 entries of every field is about 600 KiB. */
const MAX_POLICY_BODY = 1024 * 1024;

/** What the admin API needs (the gateway's context satisfies it). */
export interface AdminDeps extends HealthDeps, KeyInfoDeps {
  log(line: Record<string, unknown>): void;
  metrics: GatewayMetrics;
  /** Measurement policies (null: upstream verification is off). */
  measurementPolicies: PolicyRegistry | null;
}

function policies(ctx: AdminDeps): PolicyRegistry {
  if (!ctx.measurementPolicies) throw new GatewayError("not_found", "upstream verification is off");
  return ctx.measurementPolicies;
}

type Params = Record<string, string>;
export type AdminHandler = (
  req: Request,
  deps: AdminDeps,
  params: Params,
) => Promise<Response> | Response;

async function body<T extends z.ZodType>(req: Request, schema: T): Promise<z.infer<T>> {
  requireJsonContentType(req);
  return parseWith(schema, parseJsonBody(await readBody(req, MAX_ADMIN_BODY)));
}

function keyId(params: Params): string {
  if (!isKeyId(params.id)) throw badParam("key_id", "key ids look like key_<12 hex>");
  return params.id;
}

/**
 * Authorises, runs and audits one admin action (the route table wraps each
 * `operator` row's handler in it once, at start-up).
 */
export function guarded<D extends AdminDeps>(
  action: string,
  h: (req: Request, deps: D, params: Params) => Promise<Response> | Response,
): (req: Request, deps: D, params: Params) => Promise<Response> {
  return async (req, ctx, params) => {
    if (ctx.operator === null) throw new GatewayError("not_found", "no such endpoint");
    const audit = (status: number, outcome: string) =>
      ctx.log({
        level: "info",
        msg: "admin",
        action,
        key_id: params.id ?? null,
        status,
        outcome,
      });
    if (!ctx.operator.check(req.headers.get("authorization"))) {
      audit(401, "unauthorized");
      throw new GatewayError("unauthorized", "the operator token is required");
    }
    try {
      const res = await h(req, ctx, params);
      audit(res.status, "ok");
      return res;
    } catch (e) {
      const err = e instanceof KeyArgumentError ? badParam(e.param, e.message) : asGatewayError(e);
      audit(err.status, err.kind);
      throw err;
    }
  };
}

/** `POST /admin/v1/keys`. */
export const createKey: AdminHandler = async (req, ctx) => {
  const b = await body(req, CreateKeyBody);
  const { key, summary } = await ctx.keyAdmin.create(b);
  // The key is in this one response only; it is never stored or logged.
  return jsonResponse({ ...summary, key }, 201, { "cache-control": "no-store" });
};

/** `GET /admin/v1/keys`. */
export const listKeys: AdminHandler = async (_req, ctx) =>
  jsonResponse({ data: await ctx.keyAdmin.list() });

/** `GET /admin/v1/keys/:id`. */
export const showKey: AdminHandler = async (_req, ctx, p) =>
  jsonResponse(await ctx.keyAdmin.show(keyId(p)));

/** `PATCH /admin/v1/keys/:id`. */
export const updateKey: AdminHandler = async (req, ctx, p) => {
  const id = keyId(p);
  const res = await ctx.keyAdmin.update(id, await body(req, UpdateKeyBody));
  ctx.auth.invalidate(id); // the new limits apply at once on this replica
  return jsonResponse(res);
};

/** `POST /admin/v1/keys/:id/credit`. */
export const creditKey: AdminHandler = async (req, ctx, p) => {
  const { amount } = await body(req, CreditBody);
  const r = await ctx.keyAdmin.credit(keyId(p), amount);
  return jsonResponse({
    ...r.summary,
    ...(r.revoked ? { warning: "this key is revoked: its credits cannot be spent" } : {}),
  });
};

/** `POST /admin/v1/keys/:id/revoke`. */
export const revokeKey: AdminHandler = async (_req, ctx, p) => {
  const id = keyId(p);
  const res = await ctx.keyAdmin.revoke(id);
  ctx.auth.invalidate(id); // takes effect at once here, within the cache TTL elsewhere
  return jsonResponse(res);
};

/** `GET /admin/v1/keys/:id/usage`. */
export const keyUsage: AdminHandler = async (req, ctx, p) => {
  const id = keyId(p);
  return jsonResponse(await ctx.keyAdmin.usage(id, rangeFromQuery(req, ctx.now())));
};

/** `GET /admin/v1/usage`. */
export const usageByKey: AdminHandler = async (req, ctx) =>
  jsonResponse(await ctx.keyAdmin.usageByKey(rangeFromQuery(req, ctx.now())));

/** `GET /admin/v1/health`. */
export const adminHealth: AdminHandler = (_req, ctx) => jsonResponse(healthDetail(ctx));

/** `GET /admin/v1/measurement-policies`. */
export const listPolicies: AdminHandler = (_req, ctx) =>
  jsonResponse({ data: policies(ctx).list() });

/**
 * `PUT /admin/v1/measurement-policies/:id`: a signed policy for one upstream; takes effect at
 * once (no restart): the upstream's current session is re-checked, and one the policy does not
 * accept ends now.
 */
export const installPolicy: AdminHandler = async (req, ctx, p) => {
  const reg = policies(ctx);
  if (!ctx.config.providers.some((x) => x.name === p.id && x.confidential)) {
    throw new GatewayError("not_found", `no confidential upstream ${p.id}`);
  }
  requireJsonContentType(req);
  const r = reg.install(p.id, parseJsonBody(await readBody(req, MAX_POLICY_BODY)));
  if (!r.ok) throw badParam("policy", r.reason);
  ctx.log({
    level: "info",
    msg: "measurement policy installed",
    upstream: p.id,
    version: r.installed.policy.version,
    digest: r.installed.digest,
    changed: r.changed,
  });
  return jsonResponse({
    upstream: p.id,
    version: r.installed.policy.version,
    digest: r.installed.digest,
    key_id: r.installed.key_id,
    changed: r.changed,
  });
};

/** `GET /admin/v1/metrics`. */
export const adminMetrics: AdminHandler = async (_req, ctx) =>
  new Response(await ctx.metrics.render(), {
    headers: { "content-type": ctx.metrics.contentType, "cache-control": "no-store" },
  });
