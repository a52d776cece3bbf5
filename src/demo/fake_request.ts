/**
 * Request schemas of the demo upstream: the subset of the OpenAI chat,
 * legacy completions and embeddings requests the fake model reads, validated
 * strictly (a bad value is a 400 naming the parameter, never coerced) while
 * unknown fields pass through, as a real OpenAI-compatible server tolerates them.
 */
import { z } from "zod";
import { badParam, GatewayError } from "../http/mod.ts";

const positiveInt = z.int().positive();

const textPart = z.object({ type: z.literal("text"), text: z.string() }).loose();
const imagePart = z.object({
  type: z.literal("image_url"),
  image_url: z.union([z.string(), z.object({ url: z.string() }).loose()]),
}).loose();
// Other part kinds (audio, files, …) are acknowledged by their type only.
const otherPart = z.object({
  type: z.string().refine((t) => t !== "text" && t !== "image_url", "malformed content part"),
}).loose();
const contentPart = z.union([textPart, imagePart, otherPart]);
export type FakeContentPart = z.infer<typeof contentPart>;

const message = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(contentPart), z.null()]).optional(),
  tool_calls: z.array(
    z.object({
      id: z.string(),
      type: z.literal("function"),
      function: z.object({ name: z.string(), arguments: z.string() }).loose(),
    }).loose(),
  ).optional(),
  tool_call_id: z.string().optional(),
}).loose();
export type FakeMessage = z.infer<typeof message>;

const stop = z.union([z.string(), z.array(z.string()).max(4)]).nullish();
const streamOptions = z.object({ include_usage: z.boolean().nullish() }).loose().nullish();

const tool = z.object({
  type: z.literal("function"),
  function: z.object({ name: z.string().min(1) }).loose(),
}).loose();

const toolChoice = z.union([
  z.enum(["auto", "none", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string() }).loose() })
    .loose(),
]).nullish();

const responseFormat = z.object({
  type: z.enum(["text", "json_object", "json_schema"]),
  json_schema: z.object({ schema: z.record(z.string(), z.unknown()).optional() }).loose()
    .optional(),
}).loose().nullish();

const chatRequest = z.object({
  model: z.string().min(1),
  messages: z.array(message).min(1),
  stream: z.boolean().nullish(),
  stream_options: streamOptions,
  max_tokens: positiveInt.nullish(),
  max_completion_tokens: positiveInt.nullish(),
  stop,
  n: z.literal(1).nullish(),
  tools: z.array(tool).nullish(),
  tool_choice: toolChoice,
  response_format: responseFormat,
  reasoning_effort: z.string().nullish(),
}).loose();
export type FakeChatRequest = z.infer<typeof chatRequest>;

const completionRequest = z.object({
  model: z.string().min(1),
  prompt: z.union([z.string(), z.array(z.string()).min(1)]),
  stream: z.boolean().nullish(),
  stream_options: streamOptions,
  max_tokens: positiveInt.nullish(),
  stop,
  n: z.literal(1).nullish(),
}).loose();
export type FakeCompletionRequest = z.infer<typeof completionRequest>;

const tokenArray = z.array(z.int().nonnegative()).min(1);
const embeddingItem = z.union([
  z.string(),
  tokenArray,
  z.object({
    type: z.literal("image_url"),
    image_url: z.union([z.string(), z.object({ url: z.string() }).loose()]),
  }).loose(),
  z.object({
    type: z.literal("video_url"),
    video_url: z.union([z.string(), z.object({ url: z.string() }).loose()]),
  }).loose(),
]);
export type FakeEmbeddingItem = z.infer<typeof embeddingItem>;

const embeddingRequest = z.object({
  model: z.string().min(1),
  // A flat integer array is one tokenized input; any other array is a list of items.
  input: z.union([embeddingItem, z.array(embeddingItem).min(1)]),
  dimensions: positiveInt.nullish(),
  encoding_format: z.enum(["float", "base64"]).nullish(),
}).loose();
export type FakeEmbeddingRequest = z.infer<typeof embeddingRequest>;

/** `messages[0].content` style name of a zod issue path. */
function paramName(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    out += typeof key === "number" ? `[${key}]` : `${out ? "." : ""}${String(key)}`;
  }
  return out;
}

function parseWith<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new GatewayError("invalid_request", "request body must be a JSON object");
  }
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const param = issue ? paramName(issue.path) : "body";
  // The message names the parameter only: zod messages never echo the value.
  throw badParam(param || "body", `invalid value for '${param || "body"}'`);
}

/** Validates a chat completions request body (throws a 400 `GatewayError`). */
export function parseChatRequest(body: unknown): FakeChatRequest {
  return parseWith(chatRequest, body);
}

/** Validates a legacy completions request body (throws a 400 `GatewayError`). */
export function parseCompletionRequest(body: unknown): FakeCompletionRequest {
  return parseWith(completionRequest, body);
}

/** Validates an embeddings request body (throws a 400 `GatewayError`). */
export function parseEmbeddingRequest(body: unknown): FakeEmbeddingRequest {
  return parseWith(embeddingRequest, body);
}
