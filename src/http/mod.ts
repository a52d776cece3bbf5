/**
 * HTTP's front door: the one error type, body and JSON helpers, the router, the layer chain,
 * the client's trace and metadata headers and the accept loop.
 */

export {
  type JsonDocument,
  largeBodyTurn,
  parseJsonBody,
  parseJsonDocument,
  readBody,
  requireJsonContentType,
} from "./body.ts";
export { BodyBudget, type BodyTicket } from "./body_budget.ts";
export { compose, type Layer, type Render } from "./chain.ts";
export { type ConnectionServer, serveConnections, type ServeOn } from "./connections.ts";
export {
  type CorsPolicy,
  corsPolicy,
  decorate,
  EXPOSED_HEADERS,
  isPreflight,
  preflightResponse,
} from "./cors.ts";
export { type After, type Deadline, DeadlineWheel, timerAfter } from "./deadlines.ts";
export {
  asGatewayError,
  badParam,
  ERROR_KINDS,
  errorBody,
  errorBytes,
  errorCodeOf,
  type ErrorFormat,
  errorResponse,
  GatewayError,
} from "./errors.ts";
export { jsonResponse } from "./json.ts";
export { textBytes } from "./json_pieces.ts";
export { freezeJson, spliceJson } from "./json_splice.ts";
export type { Params } from "./params.ts";
export { metadataOf, traceIdOf } from "./request_headers.ts";
export { type Handler, type Miss, Router } from "./router.ts";
