/**
 * zod schemas of an OpenAI Responses request, as far as the gateway accepts it.
 * Input items are validated one by one (request.ts picks the schema by `type`)
 * so that errors name `input[i]…` precisely.
 */

import { z } from "zod";
import { mediaUrl } from "../chat/request.ts";

export const InputText = z.object({ type: z.literal("input_text"), text: z.string() });
export const OutputText = z.object({ type: z.literal("output_text"), text: z.string() });
export const Refusal = z.object({ type: z.literal("refusal"), refusal: z.string() });
export const InputImage = z.object({
  type: z.literal("input_image"),
  image_url: mediaUrl.nullable().optional(),
  file_id: z.string().nullable().optional(),
  detail: z.enum(["low", "high", "auto", "original"]).optional(),
});

const ContentPart = z.discriminatedUnion("type", [InputText, OutputText, Refusal, InputImage]);
export type ResponsesContentPart = z.infer<typeof ContentPart>;

export const MessageItem = z.object({
  type: z.literal("message").optional(),
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: z.union([z.string(), z.array(ContentPart)]),
});

export const FunctionCallItem = z.object({
  type: z.literal("function_call"),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
});

export const FunctionCallOutputItem = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(z.discriminatedUnion("type", [InputText, InputImage]))]),
});

/** Reasoning items replayed from an earlier response: accepted and dropped. */
export const ReasoningItem = z.object({ type: z.literal("reasoning") });

export const FunctionTool = z.object({
  type: z.literal("function"),
  name: z.string().min(1).max(128),
  description: z.string().nullable().optional(),
  parameters: z.record(z.string(), z.unknown()).nullable().optional(),
  strict: z.boolean().nullable().optional(),
});
export type FunctionTool = z.infer<typeof FunctionTool>;

export const ToolChoice = z.union([
  z.enum(["auto", "none", "required"]),
  z.object({ type: z.literal("function"), name: z.string().min(1) }),
]);
export type ToolChoice = z.infer<typeof ToolChoice>;

export const TextFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    name: z.string().min(1),
    schema: z.record(z.string(), z.unknown()),
    description: z.string().optional(),
    strict: z.boolean().nullable().optional(),
  }),
]);
export type TextFormat = z.infer<typeof TextFormat>;

/** Top level; `input` items and `tools` entries are checked item by item in request.ts. */
export const ResponsesRequestSchema = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.unknown())]),
  instructions: z.string().nullable().optional(),
  tools: z.array(z.unknown()).optional(),
  tool_choice: ToolChoice.optional(),
  parallel_tool_calls: z.boolean().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  max_output_tokens: z.int().min(1).optional(),
  text: z.object({ format: TextFormat.optional() }).optional(),
  reasoning: z.object({
    effort: z.enum(["none", "minimal", "low", "medium", "high", "xhigh"]).nullable().optional(),
  }).nullable().optional(),
  previous_response_id: z.string().nullable().optional(),
  conversation: z.unknown().optional(),
  background: z.boolean().nullable().optional(),
  store: z.boolean().nullable().optional(),
  // Values are checked in request.ts so that an error never names a client-chosen key.
  metadata: z.record(z.string(), z.unknown()).nullable().optional(),
  user: z.string().optional(),
  stream: z.boolean().nullable().optional(),
  provider: z.unknown().optional(),
});
export type ResponsesRequest = z.infer<typeof ResponsesRequestSchema>;
