/**
 * Anthropic Messages request → OpenAI chat request.
 *
 * Choices made here (the two formats do not map one-to-one):
 * - `temperature` is validated on the service spec's 0–2 range (wider than
 *   Anthropic's 0–1) and forwarded unscaled: the value sent is the one applied.
 * - `system` text blocks are joined with "\n" into one system message string.
 * - A user turn holding `tool_result` blocks becomes the `role:"tool"` messages
 *   first (they must directly follow the assistant turn that called the tools),
 *   then one user message with the remaining text/image blocks, if any.
 * - `is_error: true` tool results are prefixed "Error: " so the model still
 *   sees that the call failed (chat has no error flag on tool messages).
 * - `thinking` / `redacted_thinking` blocks in history are dropped: chat
 *   upstreams cannot verify or reuse them. The top-level `thinking` config is
 *   accepted and not forwarded (chat has no budget equivalent).
 * - Structured output `output_config.format` (or the beta's `output_format`)
 *   becomes chat's strict `response_format: json_schema`; `output_config.effort`
 *   becomes `reasoning_effort` (`max` has no chat value: refused by name).
 */

import type { ChatContentPart, ChatMessage, ChatRequest, ChatToolCall } from "../chat/types.ts";
import { badParam } from "../../http/mod.ts";
import { type ContentBlock, type ImageBlock, MessagesRequestSchema } from "./schema.ts";
import { zodToBadParam } from "./param_error.ts";

export interface ParsedMessagesRequest {
  chat: ChatRequest;
  /** The routing block, untouched; the gateway validates it. */
  provider: unknown;
  stream: boolean;
  model: string;
  /** Requested stop sequences, needed to report `stop_sequence` in the response. */
  stopSequences: string[];
  /** Where the client put its structured-output format (named in a refusal). */
  formatParam: "output_config.format" | "output_format";
}

function imagePart(block: ImageBlock): ChatContentPart {
  const src = block.source;
  const url = src.type === "base64" ? `data:${src.media_type};base64,${src.data}` : src.url;
  return { type: "image_url", image_url: { url } };
}

/** A single text part stays a plain string: the most widely accepted chat shape. */
function collapse(parts: ChatContentPart[]): string | ChatContentPart[] {
  const only = parts[0];
  if (parts.length === 1 && only?.type === "text") return only.text;
  return parts;
}

function toolResultContent(
  content: string | Array<{ type: "text"; text: string } | ImageBlock> | undefined,
  isError: boolean,
): string | ChatContentPart[] {
  const prefix = isError ? "Error: " : "";
  if (content === undefined) return prefix;
  if (typeof content === "string") return prefix + content;
  const hasImage = content.some((b) => b.type === "image");
  if (!hasImage) return prefix + content.map((b) => b.type === "text" ? b.text : "").join("\n");
  const parts: ChatContentPart[] = content.map((b) =>
    b.type === "text" ? { type: "text", text: b.text } : imagePart(b)
  );
  if (prefix) parts.unshift({ type: "text", text: prefix.trimEnd() });
  return parts;
}

function userTurn(blocks: ContentBlock[], at: string): ChatMessage[] {
  const tools: ChatMessage[] = [];
  const parts: ChatContentPart[] = [];
  blocks.forEach((b, j) => {
    switch (b.type) {
      case "text":
        parts.push({ type: "text", text: b.text });
        break;
      case "image":
        parts.push(imagePart(b));
        break;
      case "tool_result":
        tools.push({
          role: "tool",
          tool_call_id: b.tool_use_id,
          content: toolResultContent(b.content, b.is_error === true),
        });
        break;
      default:
        throw badParam(
          `${at}.content[${j}].type`,
          `${at}.content[${j}].type: "${b.type}" blocks are only allowed in assistant messages`,
        );
    }
  });
  const out = tools;
  if (parts.length > 0) out.push({ role: "user", content: collapse(parts) });
  return out;
}

function assistantTurn(blocks: ContentBlock[], at: string): ChatMessage {
  const texts: string[] = [];
  const calls: ChatToolCall[] = [];
  blocks.forEach((b, j) => {
    switch (b.type) {
      case "text":
        texts.push(b.text);
        break;
      case "tool_use":
        calls.push({
          id: b.id,
          type: "function",
          function: { name: b.name, arguments: JSON.stringify(b.input) },
        });
        break;
      case "thinking":
      case "redacted_thinking":
        break; // see module doc: reasoning history is not forwarded
      default:
        throw badParam(
          `${at}.content[${j}].type`,
          `${at}.content[${j}].type: "${b.type}" blocks are only allowed in user messages`,
        );
    }
  });
  const text = texts.join("");
  if (calls.length > 0) {
    return { role: "assistant", content: text === "" ? null : text, tool_calls: calls };
  }
  return { role: "assistant", content: text };
}

/** Validate an Anthropic Messages body and translate it; throws `badParam` naming the field. */
export function parseMessagesRequest(body: unknown): ParsedMessagesRequest {
  const parsed = MessagesRequestSchema.safeParse(body);
  if (!parsed.success) throw zodToBadParam(parsed.error, body);
  const req = parsed.data;

  const messages: ChatMessage[] = [];
  if (req.system !== undefined) {
    const text = typeof req.system === "string"
      ? req.system
      : req.system.map((b) => b.text).join("\n");
    if (text !== "") messages.push({ role: "system", content: text });
  }
  req.messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    if (typeof m.content === "string") {
      messages.push(
        m.role === "user"
          ? { role: "user", content: m.content }
          : { role: "assistant", content: m.content },
      );
      return;
    }
    if (m.role === "user") messages.push(...userTurn(m.content, at));
    else messages.push(assistantTurn(m.content, at));
  });

  const chat: ChatRequest = { model: req.model, messages, max_tokens: req.max_tokens };
  if (req.temperature !== undefined) chat.temperature = req.temperature;
  if (req.top_p !== undefined) chat.top_p = req.top_p;
  if (req.top_k !== undefined) chat.top_k = req.top_k;
  const stopSequences = req.stop_sequences ?? [];
  if (stopSequences.length > 0) chat.stop = stopSequences;
  if (req.tools !== undefined && req.tools.length > 0) {
    chat.tools = req.tools.map((t) => ({
      type: "function",
      function: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.input_schema,
      },
    }));
  }
  const tc = req.tool_choice;
  if (tc !== undefined) {
    if (tc.type === "auto") chat.tool_choice = "auto";
    else if (tc.type === "any") chat.tool_choice = "required";
    else if (tc.type === "none") chat.tool_choice = "none";
    else chat.tool_choice = { type: "function", function: { name: tc.name } };
    if (tc.type !== "none" && tc.disable_parallel_tool_use === true) {
      chat.parallel_tool_calls = false;
    }
  }
  const format = req.output_config?.format ?? req.output_format;
  if (format) {
    if (req.output_config?.format && req.output_format) {
      throw badParam(
        "output_format",
        "output_format: give either output_config.format or output_format",
      );
    }
    chat.response_format = {
      type: "json_schema",
      json_schema: { name: "output", schema: format.schema, strict: true },
    };
  }
  const effort = req.output_config?.effort;
  if (effort === "max") {
    throw badParam(
      "output_config.effort",
      'output_config.effort: "max" has no equivalent on this gateway\'s upstreams; use low, medium, high or xhigh',
    );
  }
  if (effort) chat.reasoning_effort = effort;
  const userId = req.metadata?.user_id;
  if (typeof userId === "string" && userId !== "") chat.user = userId;
  const stream = req.stream === true;
  if (stream) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  const formatParam = req.output_format ? "output_format" : "output_config.format";
  return { chat, provider: req.provider, stream, model: req.model, stopSequences, formatParam };
}
