/**
 * The one place the app renders an error: a `GatewayError` (anything else is
 * an internal error, logged) as the route's envelope, with its headers and
 * the trace id. The pipeline renders its own refusals, whose bytes its
 * receipt binds, with the same `errorBody`.
 */
import { asGatewayError, errorBody, errorCodeOf, jsonResponse, type Render } from "../http/mod.ts";
import type { LogLine } from "../handlers/mod.ts";
import type { Exchange } from "./exchange.ts";

export function errorRenderer(log: (line: LogLine) => void): Render<Exchange> {
  return (s, e) => {
    const err = asGatewayError(e);
    s.info.errorCode = errorCodeOf(err);
    if (err.kind === "internal") {
      log({ level: "error", request_id: s.info.requestId, error: String(e) });
    }
    const res = jsonResponse(errorBody(err, s.format), err.status, err.headers);
    if (s.info.traceId) res.headers.set("x-service-trace-id", s.info.traceId);
    return res;
  };
}
