/** The inference endpoints (run by the pipeline) and Anthropic's token count. */
import {
  chatEndpoint,
  completionsEndpoint,
  countTokens,
  embeddingsEndpoint,
  messagesEndpoint,
  responsesEndpoint,
} from "../../handlers/mod.ts";
import {
  ChatCompletionSchema,
  chatRequestSchema,
  completionRequestSchema,
  CompletionSchema,
  embeddingRequestSchema,
  EmbeddingsSchema,
  MessageSchema,
  MessagesRequestSchema,
  ResponseSchema,
  ResponsesRequestSchema,
} from "../../formats/mod.ts";
import { answer, INFERENCE_ERRORS, schemaOf } from "../../operator/mod.ts";
import type { RouteRow } from "./row.ts";

export const INFERENCE_ROUTES: RouteRow[] = [
  {
    method: "POST",
    path: "/v1/chat/completions",
    inference: chatEndpoint,
    format: "openai.chat_completions",
    auth: "key",
    doc: {
      summary: "Chat completion (OpenAI format); streamed as SSE with stream: true",
      tag: "inference",
      body: schemaOf(chatRequestSchema),
      ok: answer(ChatCompletionSchema),
      errors: INFERENCE_ERRORS,
      streams: true,
    },
  },
  {
    method: "POST",
    path: "/v1/completions",
    inference: completionsEndpoint,
    format: "openai.completions",
    auth: "key",
    doc: {
      summary: "Legacy text completion (OpenAI format)",
      tag: "inference",
      body: schemaOf(completionRequestSchema),
      ok: answer(CompletionSchema),
      errors: INFERENCE_ERRORS,
      streams: true,
    },
  },
  {
    method: "POST",
    path: "/v1/embeddings",
    inference: embeddingsEndpoint,
    format: "openai.embeddings",
    auth: "key",
    doc: {
      summary: "Embeddings (OpenAI format)",
      tag: "inference",
      body: schemaOf(embeddingRequestSchema),
      ok: answer(EmbeddingsSchema),
      errors: INFERENCE_ERRORS,
    },
  },
  {
    method: "POST",
    path: "/v1/messages",
    inference: messagesEndpoint,
    format: "anthropic.messages",
    auth: "key",
    doc: {
      summary: "Messages (Anthropic format); streamed as SSE with stream: true",
      tag: "inference",
      body: schemaOf(MessagesRequestSchema),
      ok: answer(MessageSchema),
      errors: INFERENCE_ERRORS,
      streams: true,
    },
  },
  {
    method: "POST",
    path: "/v1/messages/count_tokens",
    handler: countTokens,
    envelope: "anthropic",
    auth: "key",
    doc: {
      summary: "Count a Messages request's input tokens (Anthropic format; the limits' tokenizer)",
      tag: "inference",
      body: schemaOf(MessagesRequestSchema.partial({ max_tokens: true })),
      ok: {
        schema: {
          type: "object",
          properties: { input_tokens: { type: "integer" } },
          required: ["input_tokens"],
        },
      },
      errors: [400, 401, 404, 413, 415],
    },
  },
  {
    method: "POST",
    path: "/v1/responses",
    inference: responsesEndpoint,
    format: "openai.responses",
    auth: "key",
    doc: {
      summary: "Responses (OpenAI Responses format); streamed as SSE with stream: true",
      tag: "inference",
      body: schemaOf(ResponsesRequestSchema),
      ok: answer(ResponseSchema),
      errors: INFERENCE_ERRORS,
      streams: true,
    },
  },
];
