/** The handlers' front door: one module per endpoint, their context and the inference pipeline. */

export {
  adminHealth,
  adminMetrics,
  createKey,
  creditKey,
  guarded,
  installPolicy,
  keyUsage,
  listKeys,
  listPolicies,
  revokeKey,
  showKey,
  updateKey,
  usageByKey,
} from "./admin.ts";
export { replaceConfig, showConfig } from "./admin_config.ts";
export { canonicalAttestation, legacyAttestation } from "./attestation.ts";
export { listEmbeddingModels, listModels, retrieveModel, vendorModels } from "./catalog.ts";
export { chatEndpoint } from "./chat.ts";
export { completionsEndpoint } from "./completions.ts";
export type { ConfigControl, ConfigView } from "./config_control.ts";
export type { GatewayContext, LogLine } from "./context.ts";
export { countTokens } from "./count_tokens.ts";
export { embeddingsEndpoint } from "./embeddings.ts";
export { getEvidenceBundle } from "./evidence_bundle.ts";
export { healthz } from "./health.ts";
export { getOwnKey, getOwnUsage } from "./key_info.ts";
export { messagesEndpoint } from "./messages.ts";
export { handleInference, type InferenceEndpoint } from "./pipeline.ts";
export { getLegacySignature, getReceipt } from "./receipts.ts";
export type { RequestInfo } from "./request_info.ts";
export { requestLogger } from "./request_log.ts";
export { responsesEndpoint } from "./responses.ts";
export { getSession, listSessions } from "./sessions.ts";
export { StreamTicker, tickPeriodMs } from "./stream_ticker.ts";
export { getCheckpoint, getConsistency, getInclusion, getTile, TILE_SEGMENTS } from "./tlog.ts";
export { verifyPage, verifyScript } from "./verify_page.ts";
