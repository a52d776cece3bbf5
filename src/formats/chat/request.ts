/**
 * `/v1/chat/completions` requests: zod validation of the client body, model
 * capability checks shared by every format (token parameter, images, tools),
 * the upstream body, and the streaming pass-through translator. Pure.
 */
import {
  byteLength,
  chatTokenCeiling,
  type CountableMessage,
  countChatInto,
  type ScopedCounts,
  type TextMeasure,
  TokenCounter,
  type TokenizerName,
} from "../../tokens/mod.ts";
import { z } from "zod";
import { badParam } from "../../http/mod.ts";
import type { ChatModel } from "../../catalog/mod.ts";
import type { ChatMessage, ChatRequest, ChatResponse } from "./types.ts";
import { parseWith } from "../zod_error.ts";

const text = z.strictObject({ type: z.literal("text"), text: z.string() });

const DATA_URL =
  /^data:[a-z]+\/[a-z0-9.+-]+(?:;[a-z0-9-]+=[^;,]*)*;base64,([A-Za-z0-9+/]*={0,2})$/i;

/**
 * An image (or video) URL in any format. Inline `data:` URLs must be well-formed
 * base64, checked here so a corrupt upload is a 400 naming the part instead of
 * being forwarded for the upstream to choke on.
 */
export const mediaUrl = z.string().min(1).refine((u) => {
  if (!/^data:/i.test(u)) return true;
  const m = DATA_URL.exec(u);
  if (m === null || m[1].length === 0) return false;
  // Padded data must be whole quads; unpadded data can never leave a single char over.
  return m[1].endsWith("=") ? m[1].length % 4 === 0 : m[1].length % 4 !== 1;
}, "data URLs must be data:<media type>;base64,<base64 data>");

const image = z.strictObject({
  type: z.literal("image_url"),
  image_url: z.strictObject({
    url: mediaUrl,
    detail: z.enum(["auto", "low", "high"]).optional(),
  }),
});
const part = z.discriminatedUnion("type", [text, image], {
  error: (iss) =>
    iss.code === "invalid_union" ? "content part type must be 'text' or 'image_url'" : undefined,
});
const content = z.union([z.string(), z.array(part)]);
const toolCall = z.strictObject({
  id: z.string().min(1),
  type: z.literal("function"),
  function: z.strictObject({ name: z.string().min(1), arguments: z.string() }),
});

const message = z.discriminatedUnion("role", [
  z.looseObject({ role: z.literal("system"), content, name: z.string().optional() }),
  z.looseObject({ role: z.literal("developer"), content, name: z.string().optional() }),
  z.looseObject({ role: z.literal("user"), content, name: z.string().optional() }),
  z.looseObject({
    role: z.literal("assistant"),
    content: content.nullable().optional(),
    tool_calls: z.array(toolCall).optional(),
    name: z.string().optional(),
  }),
  z.looseObject({ role: z.literal("tool"), content, tool_call_id: z.string().min(1) }),
], {
  error: (iss) =>
    iss.code === "invalid_union"
      ? "role must be one of system, developer, user, assistant, tool"
      : undefined,
});

const tool = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject({
    name: z.string().regex(
      /^[a-zA-Z0-9_-]{1,64}$/,
      "function names are 1-64 letters, digits, _ or -",
    ),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullable().optional(),
  }),
});

const toolChoice = z.union([
  z.enum(["auto", "none", "required"]),
  z.strictObject({ type: z.literal("function"), function: z.strictObject({ name: z.string() }) }),
]);

const posInt = z.number().int().positive();

export const chatRequestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(message).min(1, "messages must contain at least one message"),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  n: z.number().int().min(1).max(128).optional(),
  max_tokens: posInt.optional(),
  max_completion_tokens: posInt.optional(),
  stream: z.boolean().optional(),
  stream_options: z.strictObject({
    include_usage: z.boolean().optional(),
    include_obfuscation: z.boolean().optional(),
  }).nullable().optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullable().optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  tools: z.array(tool).max(128).optional(),
  tool_choice: toolChoice.optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: z.looseObject({ type: z.enum(["text", "json_object", "json_schema"]) })
    .optional(),
  seed: z.number().int().optional(),
  user: z.string().max(256).optional(),
  reasoning_effort: z.enum(["none", "minimal", "low", "medium", "high", "xhigh"]).optional(),
  // OpenRouter's usage accounting: honoured by the gateway (usage in the answer), never forwarded.
  usage: z.strictObject({ include: z.boolean() }).optional(),
  provider: z.unknown().optional(),
});

export interface ParsedChat {
  model: string;
  chat: ChatRequest;
  provider: unknown;
  stream: boolean;
  /** Did the client ask for a usage chunk (`stream_options.include_usage`, OpenRouter's `usage.include`)? */
  clientWantsUsage: boolean;
  /** `stream_options.include_obfuscation`: pad each streamed chunk (see openai_stream.ts). */
  obfuscate: boolean;
}

export function parseChatRequest(body: unknown): ParsedChat {
  const r = parseWith(chatRequestSchema, body);
  const { provider, usage, ...rest } = r;
  const chat = rest as ChatRequest;
  // Gateway-side options: answered here, not sent to upstreams that may not know them.
  const obfuscate = r.stream_options?.include_obfuscation === true;
  if (r.stream_options) {
    const { include_obfuscation: _, ...so } = r.stream_options;
    chat.stream_options = so;
  }
  return {
    model: r.model,
    chat,
    provider,
    stream: r.stream === true,
    clientWantsUsage: r.stream_options?.include_usage === true || usage?.include === true,
    obfuscate,
  };
}

/** How the client's format names fields the chat checks refuse (Anthropic: `output_config.*`). */
export type ChatParamNames = Partial<
  Record<"response_format" | "reasoning_effort" | "max_tokens", string>
>;

/**
 * Checks every format's canonical chat request against the model's catalog
 * entry. `clientNamedTokenParam` is true for native chat clients: they may
 * name either token parameter (generic clients pick it by model name) and get
 * it renamed to the model's, unless the model is `strict_token_parameter`,
 * where the other one is the spec's 400 (docs/decisions/chat-token-parameter.md).
 * `names` says what the client's format calls the fields named in a refusal.
 */
export function checkChatAgainstModel(
  chat: ChatRequest,
  model: ChatModel,
  clientNamedTokenParam: boolean,
  names: ChatParamNames = {},
): void {
  const wanted = model.tokenParam;
  const other = wanted === "max_tokens" ? "max_completion_tokens" : "max_tokens";
  if (chat[other] !== undefined && clientNamedTokenParam) {
    if (model.config.strict_token_parameter === true) {
      throw badParam(other, `model ${model.id} does not accept '${other}'; use '${wanted}'`);
    }
    if (chat[wanted] !== undefined && chat[wanted] !== chat[other]) {
      throw badParam(other, `'${other}' and '${wanted}' disagree; give one of them`);
    }
  }
  const limit = chat[wanted] ?? chat[other];
  if (limit !== undefined && limit > model.config.max_output_length) {
    throw badParam(
      clientNamedTokenParam
        ? (chat[wanted] !== undefined ? wanted : other)
        : names.max_tokens ?? other,
      `at most ${model.config.max_output_length} output tokens for model ${model.id}`,
    );
  }
  // Parameters a route's upstream refuses are not advertised and not forwarded (n: only n > 1).
  for (const p of model.refusedParameters) {
    const v = (chat as unknown as Record<string, unknown>)[p];
    if (v === undefined || v === null || (p === "n" && v === 1)) continue;
    throw badParam(p, `model ${model.id} does not support '${p}'${p === "n" ? " > 1" : ""}`);
  }
  const images = model.config.input_modalities.includes("image");
  chat.messages.forEach((m, i) => {
    if (Array.isArray(m.content)) {
      m.content.forEach((p, j) => {
        if (p.type === "image_url" && !images) {
          throw badParam(
            `messages[${i}].content[${j}]`,
            `model ${model.id} does not accept image input`,
          );
        }
      });
    }
  });
  const features = model.config.supported_features;
  if (chat.tools && chat.tools.length > 0 && !features.includes("tools")) {
    throw badParam("tools", `model ${model.id} does not support tools`);
  }
  if (chat.response_format?.type === "json_schema" && !features.includes("structured_outputs")) {
    const name = names.response_format ?? "response_format";
    throw badParam(name, `${name}: model ${model.id} does not support structured outputs`);
  }
  const params = model.config.supported_parameters;
  if (chat.top_k !== undefined && !params.includes("top_k")) {
    throw badParam("top_k", `model ${model.id} does not support top_k`);
  }
  if (chat.reasoning_effort !== undefined && !features.includes("reasoning")) {
    // "none" asks for what a model without reasoning already does: met, not forwarded.
    if (chat.reasoning_effort === "none") delete chat.reasoning_effort;
    else {
      const name = names.reasoning_effort ?? "reasoning_effort";
      throw badParam(name, `${name}: model ${model.id} does not support reasoning`);
    }
  }
}

/** The body forwarded upstream: upstream model name, token parameter renamed for the model, usage requested. */
export function upstreamChatBody(
  chat: ChatRequest,
  model: ChatModel,
  upstreamModel: string,
  outputCap?: number,
): ChatRequest {
  const out: ChatRequest = { ...chat, model: upstreamModel };
  const wanted = model.tokenParam;
  const other = wanted === "max_tokens" ? "max_completion_tokens" : "max_tokens";
  if (out[other] !== undefined) {
    out[wanted] ??= out[other];
    delete out[other];
  }
  // The output the admission reserved is the output the upstream may produce.
  if (out[wanted] === undefined && outputCap !== undefined) out[wanted] = outputCap;
  if (out.stream) out.stream_options = { ...out.stream_options, include_usage: true };
  return out;
}

/**
 * Prompt tokens of a chat request, counted with the model's tokenizer
 * (src/tokens/), for admission and the context check; stops counting past
 * `limit`. Settled on the upstream's real usage later.
 */
export function estimateChatTokens(
  messages: ChatMessage[],
  tokenizer: TokenizerName,
  limit?: number,
  tools?: unknown[],
  reuse?: ScopedCounts,
): number {
  // One counter for the whole request: one limit and one BPE budget (src/tokens/count.ts).
  const c = new TokenCounter(tokenizer, limit, undefined, reuse);
  countChatInto(c, messages as CountableMessage[]);
  // Tool definitions reach the model as text too: counted as their JSON.
  if (tools && tools.length > 0 && !c.over) c.text(JSON.stringify(tools));
  return c.total;
}

/**
 * A ceiling on {@link estimateChatTokens} (UTF-8 bytes; src/tokens/count.ts
 * `chatTokenCeiling`); `measure` bounds each text (default: its UTF-8 bytes).
 */
export function chatTokenCeilingOf(
  messages: ChatMessage[],
  tools?: unknown[],
  measure: TextMeasure = byteLength,
): number {
  const n = chatTokenCeiling(messages as CountableMessage[], measure);
  return tools && tools.length > 0 ? n + measure(JSON.stringify(tools)) : n;
}

/** Rewrite the upstream's model name to the id the client asked for. */
export function chatResponseForClient(res: ChatResponse, model: string): ChatResponse {
  // OpenAI always sends the member (null when unknown); some clients require it.
  return { ...res, model, system_fingerprint: res.system_fingerprint ?? null };
}
