/**
 * The answers of the inference endpoints as zod schemas: the OpenAPI
 * document's response schemas are generated from them (so a client generated
 * from /openapi.json knows `choices`, `usage.cost`…), and the end-to-end test
 * parses the gateway's real answers with them, so they cannot drift from what
 * is served. Objects are loose: upstreams add members the gateway passes on.
 */
import { z } from "zod";

const int = z.number().int().nonnegative();
/** OpenRouter's `usage.cost`: credits settled for this answer. */
const cost = z.number().nonnegative().optional();

export const ChatUsageSchema = z.looseObject({
  prompt_tokens: int,
  completion_tokens: int,
  total_tokens: int,
  cost,
});

const toolCall = z.looseObject({
  id: z.string(),
  type: z.literal("function"),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});

export const ChatCompletionSchema = z.looseObject({
  id: z.string(),
  object: z.literal("chat.completion"),
  created: int,
  model: z.string(),
  choices: z.array(z.looseObject({
    index: int,
    message: z.looseObject({
      role: z.literal("assistant"),
      content: z.string().nullable(),
      tool_calls: z.array(toolCall).optional(),
      refusal: z.string().nullable().optional(),
    }),
    finish_reason: z.string().nullable(),
  })),
  usage: ChatUsageSchema.optional(),
  system_fingerprint: z.string().nullable().optional(),
});

export const CompletionSchema = z.looseObject({
  id: z.string(),
  object: z.literal("text_completion"),
  created: int,
  model: z.string(),
  choices: z.array(z.looseObject({
    index: int,
    text: z.string(),
    finish_reason: z.string().nullable(),
  })),
  usage: ChatUsageSchema.optional(),
});

export const EmbeddingsSchema = z.looseObject({
  object: z.literal("list"),
  model: z.string(),
  data: z.array(z.looseObject({
    object: z.literal("embedding"),
    index: int,
    embedding: z.union([z.array(z.number()), z.string()]),
  })),
  usage: z.looseObject({ prompt_tokens: int, total_tokens: int, cost }),
});

export const MessageSchema = z.looseObject({
  id: z.string(),
  type: z.literal("message"),
  role: z.literal("assistant"),
  model: z.string(),
  content: z.array(z.looseObject({ type: z.string() })),
  stop_reason: z.string().nullable(),
  stop_sequence: z.string().nullable(),
  usage: z.looseObject({ input_tokens: int, output_tokens: int, cost }),
});

export const ResponseSchema = z.looseObject({
  id: z.string(),
  object: z.literal("response"),
  created_at: z.number(),
  model: z.string(),
  status: z.string(),
  output: z.array(z.looseObject({ type: z.string() })),
  usage: z.looseObject({ input_tokens: int, output_tokens: int, total_tokens: int, cost })
    .nullable().optional(),
});
