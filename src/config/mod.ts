/**
 * The configuration's front door: the schema, its types, the development configuration and the
 * reference docs' inputs.
 */

export { ACCEPTABLE_TCB_STATUSES, type AcceptableTcbStatus } from "./attestation_names.ts";
export { devConfig } from "./dev.ts";
export { configReferenceFiles } from "./reference.ts";
export {
  ConfigError,
  type EmbeddingModelConfig,
  type GatewayConfig,
  type ModelConfig,
  parseConfig,
  type ProviderConfig,
} from "./schema.ts";
