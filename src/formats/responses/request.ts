/**
 * OpenAI Responses request → OpenAI chat request.
 *
 * Choices made here:
 * - The gateway keeps no server-side state (it retains no bodies), so
 *   `previous_response_id`, `conversation`, `background: true` and `store: true`
 *   are rejected with a 400 that says so; `store` false or absent is fine.
 * - `developer` messages become `system` messages: not every chat upstream's
 *   template knows the developer role.
 * - `function_call` items merge into the assistant message right before them
 *   (consecutive calls become one assistant turn with several `tool_calls`).
 * - `reasoning` items replayed from earlier output are dropped, like thinking
 *   history in the messages adapter; `metadata` is echoed, not forwarded.
 * - Only `function` tools can be forwarded; hosted tools (web_search, file_search…)
 *   are a 400 naming the tool type.
 */

import type { ChatContentPart, ChatMessage, ChatRequest } from "../chat/types.ts";
import { badParam } from "../../http/mod.ts";
import { zodToBadParam } from "../messages/param_error.ts";
import {
  FunctionCallItem,
  FunctionCallOutputItem,
  FunctionTool,
  InputImage,
  MessageItem,
  ReasoningItem,
  type ResponsesContentPart,
  ResponsesRequestSchema,
} from "./schema.ts";
import type { z } from "zod";
import { DEFAULT_ECHO, type ResponsesEcho } from "./types.ts";

export interface ParsedResponsesRequest {
  chat: ChatRequest;
  /** The routing block, untouched; the gateway validates it. */
  provider: unknown;
  stream: boolean;
  model: string;
  /** Request settings to echo in the Response object (pass to the response/stream builders). */
  echo: ResponsesEcho;
}

const STATELESS =
  "this gateway keeps no server-side state (it retains no request or response bodies); send the full conversation in `input`";

/** Real OpenAI item/tool type names (and dated variants); nothing else the client sent is echoed. */
const KNOWN_TYPE =
  /^(?:web_search|file_search|computer|code_interpreter|image_generation|local_shell|shell|mcp|custom|apply_patch|tool_search|namespace|compaction)[a-z0-9_]{0,40}$/;

/** Echo a rejected type only when it is a known OpenAI type: the field could hold anything. */
function safeName(v: unknown): string {
  return typeof v === "string" && KNOWN_TYPE.test(v) ? `"${v}"` : "this";
}

function parseAt<T>(schema: z.ZodType<T>, value: unknown, at: PropertyKey[]): T {
  const r = schema.safeParse(value);
  if (!r.success) throw zodToBadParam(r.error, value, at);
  return r.data;
}

function imagePart(p: z.infer<typeof InputImage>, at: string): ChatContentPart {
  if (typeof p.image_url !== "string") {
    throw badParam(
      `${at}.image_url`,
      `${at}.image_url: required (file_id references are not supported)`,
    );
  }
  const detail = p.detail === "low" || p.detail === "high" ? { detail: p.detail } : {};
  return { type: "image_url", image_url: { url: p.image_url, ...detail } };
}

function partsOf(
  content: ResponsesContentPart[],
  at: string,
  imagesAllowed: boolean,
): ChatContentPart[] {
  return content.map((p, j) => {
    switch (p.type) {
      case "input_text":
      case "output_text":
        return { type: "text", text: p.text };
      case "refusal":
        return { type: "text", text: p.refusal };
      case "input_image":
        if (!imagesAllowed) {
          throw badParam(
            `${at}[${j}].type`,
            `${at}[${j}].type: images are only allowed in user messages`,
          );
        }
        return imagePart(p, `${at}[${j}]`);
    }
  });
}

function textOnly(parts: ChatContentPart[]): string {
  return parts.map((p) => (p.type === "text" ? p.text : "")).join("");
}

function collapse(parts: ChatContentPart[]): string | ChatContentPart[] {
  const only = parts[0];
  if (parts.length === 1 && only?.type === "text") return only.text;
  return parts;
}

function itemType(item: unknown): unknown {
  if (typeof item !== "object" || item === null) return undefined;
  const t: unknown = (item as { type?: unknown }).type;
  if (t === undefined && "role" in item) return "message";
  return t;
}

function inputMessages(items: unknown[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  items.forEach((raw, i) => {
    const at = `input[${i}]`;
    const type = itemType(raw);
    switch (type) {
      case "message": {
        const m = parseAt(MessageItem, raw, ["input", i]);
        if (m.role === "assistant") {
          const text = typeof m.content === "string"
            ? m.content
            : textOnly(partsOf(m.content, `${at}.content`, false));
          out.push({ role: "assistant", content: text });
          return;
        }
        const content = typeof m.content === "string"
          ? m.content
          : collapse(partsOf(m.content, `${at}.content`, m.role === "user"));
        if (m.role === "user") out.push({ role: "user", content });
        else out.push({ role: "system", content });
        return;
      }
      case "function_call": {
        const c = parseAt(FunctionCallItem, raw, ["input", i]);
        const call = {
          id: c.call_id,
          type: "function" as const,
          function: { name: c.name, arguments: c.arguments },
        };
        const prev = out[out.length - 1];
        if (prev?.role === "assistant") {
          prev.tool_calls = [...(prev.tool_calls ?? []), call];
          if (prev.content === "") prev.content = null;
        } else {
          out.push({ role: "assistant", content: null, tool_calls: [call] });
        }
        return;
      }
      case "function_call_output": {
        const o = parseAt(FunctionCallOutputItem, raw, ["input", i]);
        const content = typeof o.output === "string"
          ? o.output
          : collapse(partsOf(o.output, `${at}.output`, true));
        out.push({ role: "tool", tool_call_id: o.call_id, content });
        return;
      }
      case "reasoning":
        parseAt(ReasoningItem, raw, ["input", i]);
        return;
      case "item_reference":
        throw badParam(`${at}.type`, `${at}.type: item references need stored items; ${STATELESS}`);
      default:
        if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
          throw badParam(at, `${at}: expected an input item object`);
        }
        throw badParam(`${at}.type`, `${at}.type: unsupported input item type ${safeName(type)}`);
    }
  });
  return out;
}

function chatTools(tools: unknown[]): FunctionTool[] {
  return tools.map((t, i) => {
    const type = typeof t === "object" && t !== null ? (t as { type?: unknown }).type : undefined;
    if (type !== "function") {
      throw badParam(
        `tools[${i}].type`,
        `tools[${i}].type: only function tools are supported, not ${safeName(type)} tools`,
      );
    }
    return parseAt(FunctionTool, t, ["tools", i]);
  });
}

/** Validate a Responses body and translate it; throws `badParam` naming the field. */
// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
export function parseResponsesRequest(body: unknown): ParsedResponsesRequest {
  const parsed = ResponsesRequestSchema.safeParse(body);
  if (!parsed.success) throw zodToBadParam(parsed.error, body);
  const req = parsed.data;
  if (req.previous_response_id !== undefined && req.previous_response_id !== null) {
    throw badParam("previous_response_id", `previous_response_id is not supported: ${STATELESS}`);
  }
  if (req.conversation !== undefined && req.conversation !== null) {
    throw badParam("conversation", `conversation is not supported: ${STATELESS}`);
  }
  if (req.store === true) {
    throw badParam("store", `store: true is not supported: ${STATELESS}; send store: false`);
  }
  if (req.background === true) {
    throw badParam("background", `background: true is not supported: ${STATELESS}`);
  }

  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.metadata ?? {})) {
    if (typeof v !== "string") throw badParam("metadata", "metadata: values must be strings");
    metadata[k] = v;
  }

  const messages: ChatMessage[] = [];
  if (typeof req.instructions === "string" && req.instructions !== "") {
    messages.push({ role: "system", content: req.instructions });
  }
  if (typeof req.input === "string") messages.push({ role: "user", content: req.input });
  else messages.push(...inputMessages(req.input));
  if (messages.length === 0) throw badParam("input", "input: must not be empty");

  const tools = chatTools(req.tools ?? []);
  const chat: ChatRequest = { model: req.model, messages };
  if (req.temperature !== undefined) chat.temperature = req.temperature;
  if (req.top_p !== undefined) chat.top_p = req.top_p;
  if (req.max_output_tokens !== undefined) chat.max_tokens = req.max_output_tokens;
  if (tools.length > 0) {
    chat.tools = tools.map((t) => ({
      type: "function",
      function: {
        name: t.name,
        ...(typeof t.description === "string" ? { description: t.description } : {}),
        ...(t.parameters ? { parameters: t.parameters } : {}),
        ...(typeof t.strict === "boolean" ? { strict: t.strict } : {}),
      },
    }));
  }
  const tc = req.tool_choice;
  if (tc !== undefined) {
    chat.tool_choice = typeof tc === "string"
      ? tc
      : { type: "function", function: { name: tc.name } };
  }
  if (req.parallel_tool_calls !== undefined) chat.parallel_tool_calls = req.parallel_tool_calls;
  const format = req.text?.format;
  if (format?.type === "json_object") chat.response_format = { type: "json_object" };
  if (format?.type === "json_schema") {
    chat.response_format = {
      type: "json_schema",
      json_schema: {
        name: format.name,
        schema: format.schema,
        ...(format.description !== undefined ? { description: format.description } : {}),
        ...(typeof format.strict === "boolean" ? { strict: format.strict } : {}),
      },
    };
  }
  const effort = req.reasoning?.effort;
  if (typeof effort === "string") chat.reasoning_effort = effort;
  if (req.user !== undefined && req.user !== "") chat.user = req.user;
  const stream = req.stream === true;
  if (stream) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }

  const echo: ResponsesEcho = {
    ...DEFAULT_ECHO,
    instructions: req.instructions ?? null,
    tools,
    tool_choice: tc ?? "auto",
    temperature: req.temperature ?? null,
    top_p: req.top_p ?? null,
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    max_output_tokens: req.max_output_tokens ?? null,
    metadata,
    text: { format: format ?? { type: "text" } },
    reasoning: { effort: effort ?? null, summary: null },
    ...(req.user !== undefined ? { user: req.user } : {}),
  };
  return { chat, provider: req.provider, stream, model: req.model, echo };
}
