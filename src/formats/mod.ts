/**
 * Formats' front door: request and response formats and their translation (the Messages and
 * Responses adapters through their own `mod.ts`).
 */

export {
  chatRequestSchema,
  chatResponseForClient,
  chatTokenCeilingOf,
  checkChatAgainstModel,
  estimateChatTokens,
  parseChatRequest,
  upstreamChatBody,
} from "./chat/request.ts";
export type {
  ChatChunk,
  ChatChunkChoice,
  ChatRequest,
  ChatResponse,
  ChatToolCall,
  ChatUsage,
} from "./chat/types.ts";
export {
  completionForClient,
  completionRequestSchema,
  countCompletionPrompts,
  parseCompletionRequest,
  upstreamCompletionBody,
} from "./completions/request.ts";
export {
  checkEmbeddingAgainstModel,
  embeddingRequestSchema,
  embeddingsForClient,
  embeddingUsage,
  parseEmbeddingRequest,
  upstreamEmbeddingBody,
} from "./embeddings/request.ts";
export {
  chatToMessagesResponse,
  createMessagesStreamTranslator,
  parseMessagesRequest,
} from "./messages/mod.ts";
export { MessagesRequestSchema } from "./messages/schema.ts";
export {
  nativeBody,
  nativeMessagesPassthrough,
  nativeResponsesPassthrough,
  withModel,
} from "./native_passthrough.ts";
export { createOpenAiStreamPassthrough } from "./openai_stream.ts";
export {
  ChatCompletionSchema,
  CompletionSchema,
  EmbeddingsSchema,
  MessageSchema,
  ResponseSchema,
} from "./response_schemas.ts";
export {
  chatToResponsesResponse,
  createResponsesStreamTranslator,
  parseResponsesRequest,
} from "./responses/mod.ts";
export { ResponsesRequestSchema } from "./responses/schema.ts";
export { SseDecoder } from "./sse.ts";
export type { TokenUsage, Translator } from "./stream_translator.ts";
export { idOf, usageField } from "./upstream_fields.ts";
export { parseWith } from "./zod_error.ts";
