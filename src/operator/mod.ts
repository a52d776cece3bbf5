/**
 * The operator surface's front door: the operator token check, Prometheus metrics and the OpenAPI
 * document.
 */

export { ADMIN_TOKEN_ENV, type OperatorAuth, operatorAuth } from "./admin_token.ts";
export {
  createMetrics,
  type GatewayMetrics,
  noopMetrics,
  type ProcessStats,
  type RequestObservation,
} from "./metrics.ts";
export { openApiDocument } from "./openapi.ts";
export {
  answer,
  catalogFilters,
  dayParam,
  INFERENCE_ERRORS,
  type Op,
  schemaOf,
  str,
} from "./openapi_operations.ts";
