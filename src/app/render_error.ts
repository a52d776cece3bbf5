/**
 * The one place the app turns an error into a response: a `GatewayError`
 * (anything else is an internal error, logged) as `http/errors.ts`'s
 * `errorResponse` in the route's envelope, with the trace id. The pipeline's
 * refusals arrive here too, rethrown with their envelope and headers fixed
 * (their receipt binds `errorBytes` of the same error), so every error body
 * the gateway sends is made by the same two functions.
 */
import {
  asGatewayError,
  errorCodeOf,
  errorResponse,
  GatewayError,
  type Render,
} from "../http/mod.ts";
import type { LogLine } from "../handlers/mod.ts";
import type { Exchange } from "./exchange.ts";

export function errorRenderer(log: (line: LogLine) => void): Render<Exchange> {
  return (s, e) => {
    const err = asGatewayError(e);
    s.info.errorCode = errorCodeOf(err);
    if (err.kind === "internal") {
      // A refusal rethrown by the pipeline (its envelope fixed) carries what was first thrown
      // as its cause; any other error is logged as itself.
      const first = e instanceof GatewayError && e.envelope !== null ? e.cause : e;
      log({ level: "error", request_id: s.info.requestId, error: String(first) });
    }
    const res = errorResponse(err, s.format);
    if (s.info.traceId) res.headers.set("x-service-trace-id", s.info.traceId);
    return res;
  };
}
