/**
 * The gateway's cross-cutting work, one layer each, built once at start-up
 * and composed around the router (src/app/app.ts, src/http/chain.ts). Order,
 * outermost first: the log line, metrics, ids and trace headers, CORS and
 * preflight, `Server-Timing`, the `X-ACI-*` headers. Every layer reads and
 * writes the request's one `Exchange`.
 */
import {
  asGatewayError,
  type CorsPolicy,
  decorate,
  isPreflight,
  type Layer,
  metadataOf,
  preflightResponse,
  traceIdOf,
} from "../http/mod.ts";
import type { GatewayContext } from "../handlers/mod.ts";
import type { Exchange } from "./exchange.ts";

type Deps = Pick<
  GatewayContext,
  "logRequest" | "metrics" | "monotonic" | "randomUUID" | "identity"
>;

/** One JSON line per request, once the answer exists (a stream logs when it ends). */
export function requestLogLayer(ctx: Deps): Layer<Exchange> {
  return {
    leave(s, res) {
      s.info.route = s.pattern;
      // Health polls are not requests worth a log line each.
      if (!s.info.deferLog && s.pattern !== "/healthz") ctx.logRequest(s.info, res.status);
    },
  };
}

/** Requests in flight, and the gateway's own time (upstream wait excluded). */
export function metricsLayer(ctx: Deps): Layer<Exchange> {
  return {
    enter() {
      ctx.metrics.inFlight(1);
      return undefined;
    },
    leave(s) {
      ctx.metrics.own(ctx.monotonic() - s.started - (s.info.phases.upstream ?? 0));
      ctx.metrics.inFlight(-1);
    },
  };
}

/** `x-service-trace-id` (the client's, or a fresh one) and `x-service-metadata`. */
export function traceLayer(
  ctx: Deps,
  isInference: (method: string, path: string) => boolean,
): Layer<Exchange> {
  return {
    enter(s) {
      const { req, info } = s;
      try {
        info.traceId = traceIdOf(req.headers, ctx.randomUUID);
        info.metadata = metadataOf(req.headers);
      } catch (e) {
        // On an inference endpoint the refusal comes after authentication, with a receipt.
        if (!isInference(req.method, s.url.pathname)) throw e;
        if (!info.traceId) info.traceId = ctx.randomUUID();
        info.headerError = asGatewayError(e);
      }
      return undefined;
    },
  };
}

/** Preflights of served paths are answered here; every other answer gets the CORS grant. */
export function corsLayer(
  policy: CorsPolicy,
  allowedMethods: (path: string) => string[],
): Layer<Exchange> {
  return {
    enter(s) {
      if (!isPreflight(s.req)) return undefined;
      const methods = allowedMethods(s.url.pathname);
      if (methods.length === 0) return undefined;
      s.pattern = "preflight";
      return preflightResponse(s.req, policy, methods);
    },
    leave(s, res) {
      // A preflight answer carries its own grant (or deliberately none).
      if (s.pattern !== "preflight") decorate(s.req, res, policy);
    },
  };
}

/** The gateway's own time, and its phases (admission, upstream wait, durable commit). */
export function serverTimingLayer(ctx: Deps): Layer<Exchange> {
  return {
    leave(s, res) {
      let timing = `gw;dur=${(ctx.monotonic() - s.started).toFixed(2)}`;
      const phases = s.info.phases;
      for (const name in phases) timing += `, ${name};dur=${phases[name].toFixed(2)}`;
      res.headers.set("server-timing", timing);
    },
  };
}

/** `X-ACI-Version` and the digest of the keyset that signs this replica's receipts. */
export function aciHeadersLayer(ctx: Deps): Layer<Exchange> {
  return {
    leave(_s, res) {
      res.headers.set("x-aci-version", "aci/1");
      res.headers.set("x-aci-keyset-digest", ctx.identity.current().digest);
    },
  };
}
