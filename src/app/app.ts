/**
 * The gateway's single request handler: the router built from the route
 * table (src/app/routes/), wrapped in the layers of src/app/layers.ts
 * (log line, metrics, trace ids, CORS, `Server-Timing`, `X-ACI-*`) composed
 * once, with errors rendered in one place in the route's envelope.
 */
import { compose, corsPolicy, Router } from "../http/mod.ts";
import {
  type GatewayContext,
  guarded,
  handleInference,
  type InferenceEndpoint,
  type RequestInfo,
} from "../handlers/mod.ts";
import { API_VERSION, ROUTES } from "./routes/table.ts";
import { envelopeOf, type RouteRow } from "./routes/row.ts";
import type { Exchange } from "./exchange.ts";
import { missError } from "./route_miss.ts";
import { errorRenderer } from "./render_error.ts";
import {
  aciHeadersLayer,
  corsLayer,
  metricsLayer,
  requestLogLayer,
  serverTimingLayer,
  traceLayer,
} from "./layers.ts";

export { API_VERSION };

export type ExtraRoutes = (
  router: Router<GatewayContext>,
  inference: (ep: InferenceEndpoint) => void,
) => void;

export type AppHandler = ((req: Request) => Promise<Response>) & {
  /** The route table (for the API document's test). */
  routes(): { method: string; pattern: string }[];
};

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
  // Routes whose errors use the Anthropic envelope (the Anthropic SDK parses that shape).
  const anthropicPaths = new Set<string>();
  for (const row of routes) {
    if (envelopeOf(row) === "anthropic") anthropicPaths.add(row.path);
    if (row.inference) inference(row.inference);
    else if (row.auth !== "operator") router.on(row.method, row.path, row.handler);
    else if (row.action) router.on(row.method, row.path, guarded(row.action, row.handler));
    else throw new Error(`route ${row.method} ${row.path}: an operator route needs an action`);
  }
  extra?.(router, inference);

  const run = compose<Exchange>(
    [
      requestLogLayer(ctx),
      metricsLayer(ctx),
      traceLayer(ctx, (method, path) => method === "POST" && inferencePaths.has(path)),
      corsLayer(corsPolicy(ctx.config.cors.allowed_origins), (p) => router.allowedMethods(p)),
      serverTimingLayer(ctx),
      aciHeadersLayer(ctx),
    ],
    (s) => {
      const m = router.match(s.req.method, s.url.pathname);
      if (m.handler === null) throw missError(s.req.method, m);
      s.pattern = m.pattern;
      infos.set(s.req, s.info);
      return m.handler(s.req, handlerCtx, m.params);
    },
    errorRenderer(ctx.log),
  );

  const handler = (req: Request): Promise<Response> => {
    const started = ctx.monotonic();
    const url = new URL(req.url);
    return run({
      req,
      url,
      started,
      format: anthropicPaths.has(url.pathname) ? "anthropic" : "openai",
      pattern: "unmatched",
      info: {
        requestId: ctx.randomUUID(),
        traceId: "",
        started: ctx.now(),
        model: null,
        provider: null,
        usage: undefined,
        metadata: undefined,
        phases: {},
        traceContext: ctx.traceContext?.(),
      },
    });
  };
  return Object.assign(handler, { routes: () => router.routes() });
}
