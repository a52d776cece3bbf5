/** The model catalog's front door. */

export { anthropicModelPage, isAnthropicStyle, toAnthropicModel } from "./anthropic_models.ts";
export { Catalog, type ChatModel, type EmbeddingModel, parseCatalogFilter } from "./catalog.ts";
