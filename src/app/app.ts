/**
 * The gateway's single request handler: one route table, the standard
 * headers on every response (`X-ACI-Version`, `X-ACI-Keyset-Digest`,
 * `Server-Timing`), errors rendered once in the request's format, and one
 * JSON log line per request.
 */
import { Router } from "../http/router.ts";
import {
  asGatewayError,
  errorBody,
  errorCodeOf,
  type ErrorFormat,
  GatewayError,
} from "../http/errors.ts";
import { jsonResponse } from "../http/json.ts";
import { missError } from "./route_miss.ts";
import type { GatewayContext } from "../handlers/context.ts";
import { handleInference, type InferenceEndpoint, type RequestInfo } from "../handlers/pipeline.ts";
import { guarded } from "../handlers/admin.ts";
import { corsPolicy, decorate, isPreflight, preflightResponse } from "../http/cors.ts";
import { API_VERSION, ROUTES } from "./routes/table.ts";
import { envelopeOf, type RouteRow } from "./routes/row.ts";

export { API_VERSION };

export type ExtraRoutes = (
  router: Router<GatewayContext>,
  inference: (ep: InferenceEndpoint) => void,
) => void;

export type AppHandler = ((req: Request) => Promise<Response>) & {
  /** The route table (for the API document's test). */
  routes(): { method: string; pattern: string }[];
};

// Long as one closure over shared state; each inner function is short.
export function createApp(
  ctx: GatewayContext,
  extra?: ExtraRoutes,
  routes: readonly RouteRow[] = ROUTES,
): AppHandler {
  const router = new Router<GatewayContext>();
  const infos = new WeakMap<Request, RequestInfo>();
  // The handlers' view of the context: the same context (read through, so later
  // changes show) plus a way to name the authenticated key in the log line.
  const handlerCtx: GatewayContext = Object.assign(Object.create(ctx), {
    noteKey: (req: Request, keyId: string) => {
      const info = infos.get(req);
      if (info) info.keyId = keyId;
    },
  });
  const inferencePaths = new Set<string>();
  const inference = (ep: InferenceEndpoint) => {
    inferencePaths.add(ep.endpoint);
    router.on("POST", ep.endpoint, (req, c) => handleInference(req, c, ep, infos.get(req)!));
  };
  /** Routes whose errors use the Anthropic envelope (the Anthropic SDK parses that shape). */
  const anthropicPaths = new Set<string>();
  for (const row of routes) {
    if (envelopeOf(row) === "anthropic") anthropicPaths.add(row.path);
    if (row.inference) inference(row.inference);
    else if (row.auth !== "operator") router.on(row.method, row.path, row.handler);
    else if (row.action) router.on(row.method, row.path, guarded(row.action, row.handler));
    else throw new Error(`route ${row.method} ${row.path}: an operator route needs an action`);
  }
  extra?.(router, inference);
  const cors = corsPolicy(ctx.config.cors.allowed_origins);

  const handler = async (req: Request): Promise<Response> => {
    const started = ctx.monotonic();
    ctx.metrics.inFlight(1);
    const url = new URL(req.url);
    const format: ErrorFormat = anthropicPaths.has(url.pathname) ? "anthropic" : "openai";
    const info: RequestInfo = {
      requestId: ctx.randomUUID(),
      traceId: "",
      started: ctx.now(),
      model: null,
      provider: null,
      usage: undefined,
      metadata: undefined,
      phases: {},
      traceContext: ctx.traceContext?.(),
    };
    let res: Response;
    let pattern = "unmatched";
    try {
      try {
        info.traceId = traceIdOf(req.headers, ctx.randomUUID);
        info.metadata = metadataOf(req.headers);
      } catch (e) {
        // On an inference endpoint the refusal comes after authentication, with a receipt.
        if (!(req.method === "POST" && inferencePaths.has(url.pathname))) throw e;
        if (!info.traceId) info.traceId = ctx.randomUUID();
        info.headerError = asGatewayError(e);
      }
      const pathMethods = isPreflight(req) ? router.allowedMethods(url.pathname) : [];
      const m = pathMethods.length > 0
        ? {
          handler: () => preflightResponse(req, cors, pathMethods),
          params: {},
          pattern: "preflight",
        }
        : router.match(req.method, url.pathname);
      if (m.handler === null) throw missError(req.method, m);
      pattern = m.pattern;
      infos.set(req, info);
      res = await m.handler(req, handlerCtx, m.params);
    } catch (e) {
      const err = asGatewayError(e);
      info.errorCode = errorCodeOf(err);
      if (err.kind === "internal") {
        ctx.log({ level: "error", request_id: info.requestId, error: String(e) });
      }
      res = jsonResponse(errorBody(err, format), err.status, err.headers);
      if (info.traceId) res.headers.set("x-service-trace-id", info.traceId);
    }
    const h = res.headers;
    h.set("x-aci-version", "aci/1");
    h.set("x-aci-keyset-digest", ctx.identity.current().digest);
    // The gateway's own time, and its phases (admission, upstream wait, durable commit).
    const timing = [`gw;dur=${(ctx.monotonic() - started).toFixed(2)}`];
    for (const [name, ms] of Object.entries(info.phases)) {
      timing.push(`${name};dur=${ms.toFixed(2)}`);
    }
    h.set("server-timing", timing.join(", "));
    const gwMs = ctx.monotonic() - started;
    ctx.metrics.own(gwMs - (info.phases.upstream ?? 0));
    ctx.metrics.inFlight(-1);
    // A preflight answer carries its own grant (or deliberately none).
    if (pattern !== "preflight") decorate(req, res, cors);
    info.route = pattern;
    // Health polls are not requests worth a log line each.
    if (!info.deferLog && pattern !== "/healthz") ctx.logRequest(info, res.status);
    return res;
  };
  return Object.assign(handler, { routes: () => router.routes() });
}

const TRACE_ID = /^[A-Za-z0-9._:\/-]{1,128}$/;

function traceIdOf(h: Headers, randomUUID: () => string): string {
  const v = h.get("x-service-trace-id");
  if (v === null) return randomUUID();
  if (!TRACE_ID.test(v)) {
    throw new GatewayError(
      "invalid_request",
      "x-service-trace-id must be 1-128 characters of [A-Za-z0-9._:/-]",
      {
        param: "x-service-trace-id",
      },
    );
  }
  return v;
}

function metadataOf(h: Headers): unknown {
  const v = h.get("x-service-metadata");
  if (v === null) return undefined;
  const bad = () =>
    new GatewayError(
      "invalid_request",
      "x-service-metadata must be a JSON object of at most 2048 bytes",
      {
        param: "x-service-metadata",
      },
    );
  if (v.length > 2048) throw bad();
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    throw bad();
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw bad();
  return parsed;
}
