/**
 * zod schema of an Anthropic Messages request, as far as the gateway accepts it.
 * Unknown keys are stripped (SDKs add new optional fields often); shapes the
 * gateway cannot translate faithfully are rejected instead of being dropped.
 */

import { z } from "zod";

const TextBlock = z.object({ type: z.literal("text"), text: z.string() });

const ImageSource = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("base64"),
    media_type: z.enum(["image/jpeg", "image/png", "image/gif", "image/webp"]),
    data: z.string().min(1).regex(/^[A-Za-z0-9+/]+={0,2}$/, "must be base64"),
  }),
  z.object({ type: z.literal("url"), url: z.url({ protocol: /^https?$/ }) }),
]);

const ImageBlock = z.object({ type: z.literal("image"), source: ImageSource });

const ToolUseBlock = z.object({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
});

const ToolResultBlock = z.object({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(z.discriminatedUnion("type", [TextBlock, ImageBlock]))])
    .optional(),
  is_error: z.boolean().optional(),
});

const ThinkingBlock = z.object({ type: z.literal("thinking"), thinking: z.string() });
const RedactedThinkingBlock = z.object({ type: z.literal("redacted_thinking") });

export const ContentBlock = z.discriminatedUnion("type", [
  TextBlock,
  ImageBlock,
  ToolUseBlock,
  ToolResultBlock,
  ThinkingBlock,
  RedactedThinkingBlock,
]);
export type ContentBlock = z.infer<typeof ContentBlock>;
export type ImageBlock = z.infer<typeof ImageBlock>;
export type TextBlock = z.infer<typeof TextBlock>;

const Message = z.object({
  role: z.enum(["user", "assistant"]),
  content: z.union([z.string(), z.array(ContentBlock).min(1)]),
});

const Tool = z.object({
  // Only client ("custom") tools can be forwarded: server tools run at Anthropic.
  type: z.literal("custom").optional(),
  name: z.string().min(1).max(128),
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown()),
});

const ToolChoice = z.discriminatedUnion("type", [
  z.object({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({
    type: z.literal("tool"),
    name: z.string().min(1),
    disable_parallel_tool_use: z.boolean().optional(),
  }),
  z.object({ type: z.literal("none") }),
]);

const JsonSchemaFormat = z.strictObject({
  type: z.literal("json_schema"),
  schema: z.record(z.string(), z.unknown()),
});

/**
 * Structured output (`output_config`, and the earlier beta's top-level
 * `output_format`): mapped to chat's `response_format`; shapes without a chat
 * equivalent are refused by name, never dropped (strict objects).
 */
const OutputConfig = z.strictObject({
  format: JsonSchemaFormat.nullable().optional(),
  effort: z.enum(["low", "medium", "high", "xhigh", "max"]).nullable().optional(),
});

export const MessagesRequestSchema = z.object({
  model: z.string().min(1),
  max_tokens: z.int().min(1),
  messages: z.array(Message).min(1),
  system: z.union([z.string(), z.array(TextBlock)]).optional(),
  // Anthropic's own range; values are forwarded unscaled (see request.ts).
  // The service spec's limits table: 0–2 on every endpoint (Anthropic's own API stops at 1).
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.int().min(0).optional(),
  stop_sequences: z.array(z.string().min(1)).optional(),
  stream: z.boolean().optional(),
  tools: z.array(Tool).optional(),
  tool_choice: ToolChoice.optional(),
  metadata: z.object({ user_id: z.string().nullable().optional() }).optional(),
  thinking: z.unknown().optional(),
  output_config: OutputConfig.optional(),
  output_format: JsonSchemaFormat.nullable().optional(),
  provider: z.unknown().optional(),
});
export type MessagesRequest = z.infer<typeof MessagesRequestSchema>;
