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
import { chatEndpoint } from "../handlers/chat.ts";
import { completionsEndpoint } from "../handlers/completions.ts";
import { embeddingsEndpoint } from "../handlers/embeddings.ts";
import { messagesEndpoint } from "../handlers/messages.ts";
import { responsesEndpoint } from "../handlers/responses.ts";
import {
  listEmbeddingModels,
  listModels,
  retrieveModel,
  vendorModels,
} from "../handlers/catalog.ts";
import { getLegacySignature, getReceipt } from "../handlers/receipts.ts";
import { attestationHandlers } from "../handlers/attestation.ts";
import { getSession, listSessions } from "../handlers/sessions.ts";
import { getOwnKey, getOwnUsage } from "../handlers/key_info.ts";
import { healthz } from "../handlers/health.ts";
import { ADMIN_ROUTES } from "../handlers/admin.ts";
import { CONFIG_ROUTES } from "../handlers/admin_config.ts";
import { openApiDocument } from "../operator/openapi.ts";
import { verifyPage, verifyScript } from "../handlers/verify_page.ts";
import { corsPolicy, decorate, isPreflight, preflightResponse } from "../http/cors.ts";
import { countTokens } from "../handlers/count_tokens.ts";
import { getEvidenceBundle } from "../handlers/evidence_bundle.ts";
import {
  getCheckpoint,
  getConsistency,
  getInclusion,
  getTile,
  TILE_SEGMENTS,
} from "../handlers/tlog.ts";

export type ExtraRoutes = (
  router: Router<GatewayContext>,
  inference: (ep: InferenceEndpoint) => void,
) => void;

/** The version of the HTTP API described at /openapi.json. */
export const API_VERSION = "1.0.0";

/** Routes whose errors use the Anthropic envelope (the Anthropic SDK parses that shape). */
const ANTHROPIC_PATHS = new Set(["/v1/messages", "/v1/messages/count_tokens"]);

export type AppHandler = ((req: Request) => Promise<Response>) & {
  /** The route table (for the API document's test). */
  routes(): { method: string; pattern: string }[];
};

// Long as one closure over shared state; each inner function is short.
export function createApp(
  ctx: GatewayContext,
  extra?: ExtraRoutes,
): AppHandler {
  const router = new Router<GatewayContext>();
  let openapi: string | undefined; // built on first request, then served as is
  const attestation = attestationHandlers(ctx.reports);
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

  inference(chatEndpoint);
  inference(completionsEndpoint);
  inference(embeddingsEndpoint);
  inference(messagesEndpoint);
  inference(responsesEndpoint);
  router
    .on("POST", "/v1/messages/count_tokens", countTokens)
    .on("GET", "/v1/models", listModels)
    .on("GET", "/v1/models/:vendor", vendorModels)
    .on("GET", "/v1/models/:provider/:model", retrieveModel)
    .on("GET", "/v1/embeddings/models", listEmbeddingModels)
    .on("GET", "/v1/aci/receipts/:id", getReceipt)
    .on("GET", "/v1/signature/:id", getLegacySignature)
    .on("GET", "/v1/aci/attestation", attestation.canonical)
    .on("GET", "/v1/aci/sessions", listSessions)
    .on("GET", "/v1/aci/sessions/:id", getSession)
    .on("GET", "/v1/attestation/report", attestation.legacy)
    .on("GET", "/v1/key", getOwnKey)
    .on("GET", "/v1/usage", getOwnUsage)
    .on("GET", "/healthz", healthz)
    .on("GET", "/verify", verifyPage)
    .on("GET", "/verify/app.js", verifyScript)
    .on("GET", "/openapi.json", () => {
      openapi ??= JSON.stringify(openApiDocument(API_VERSION));
      return new Response(openapi, {
        headers: { "content-type": "application/json", "cache-control": "public, max-age=300" },
      });
    });
  router
    .on("GET", "/v1/aci/receipts/:id/inclusion", getInclusion)
    .on("GET", "/v1/aci/receipts/:id/bundle", getEvidenceBundle)
    .on("GET", "/v1/aci/log/checkpoint", getCheckpoint)
    .on("GET", "/v1/aci/log/consistency", getConsistency);
  // Tile paths have 2 to TILE_SEGMENTS segments after `tile/` (the index is split in threes).
  const segNames = ["level", "a", "b", "c", "d", "e", "f", "g"].slice(0, TILE_SEGMENTS);
  for (let n = 2; n <= TILE_SEGMENTS; n++) {
    const segs = segNames.slice(0, n).map((s) => ":" + s).join("/");
    router.on("GET", `/v1/aci/log/tile/${segs}`, getTile);
  }
  for (const [method, pattern, handler] of ADMIN_ROUTES) router.on(method, pattern, handler);
  for (const [method, pattern, handler] of CONFIG_ROUTES) router.on(method, pattern, handler);
  extra?.(router, inference);
  const cors = corsPolicy(ctx.config.cors.allowed_origins);

  const handler = async (req: Request): Promise<Response> => {
    const started = ctx.monotonic();
    ctx.metrics.inFlight(1);
    const url = new URL(req.url);
    const format: ErrorFormat = ANTHROPIC_PATHS.has(url.pathname) ? "anthropic" : "openai";
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
