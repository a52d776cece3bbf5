/**
 * The deterministic fake model: a pure function from a validated request to a
 * reply plan (reasoning tokens, content tokens or one tool call, finish reason,
 * usage). Same request → same plan, so tests can predict every byte the demo
 * upstream sends; the HTTP server only renders and paces these plans.
 */
import type { ChatUsage } from "../formats/mod.ts";
import { badParam } from "../http/mod.ts";
import type {
  FakeChatRequest,
  FakeCompletionRequest,
  FakeContentPart,
  FakeMessage,
} from "./fake_request.ts";

/** A planned tool call; the arguments string is the concatenation of its fragments. */
export interface PlannedToolCall {
  name: string;
  argumentFragments: string[];
}

/** Everything the fake model "generates" for one chat request. */
export interface ChatPlan {
  reasoning: string[];
  content: string[];
  toolCall: PlannedToolCall | null;
  finishReason: "stop" | "length" | "tool_calls";
  /** The stop string that ended the reply, reported as vLLM does (`choices[].stop_reason`). */
  stopMatched?: string;
  usage: ChatUsage;
}

/** One legacy-completions choice. */
export interface CompletionChoicePlan {
  tokens: string[];
  finishReason: "stop" | "length";
  stopMatched?: string;
}

/** Everything the fake model "generates" for one legacy completions request. */
export interface CompletionPlan {
  choices: CompletionChoicePlan[];
  usage: ChatUsage;
}

/** Tool-call argument strings are streamed in fragments of this many characters. */
export const ARGUMENT_FRAGMENT_CHARS = 8;

/**
 * Splits text into tokens: each whitespace-delimited word with the whitespace
 * before it. Trailing whitespace joins the last token so that
 * `tokenize(t).join("") === t` whenever `t` holds a word.
 */
export function tokenize(text: string): string[] {
  // Word ends, not `/\s*\S+/g`: that pattern is quadratic on a long run of whitespace.
  const tokens: string[] = [];
  let start = 0;
  for (const m of text.matchAll(/\S+/g)) {
    const end = m.index + m[0].length;
    tokens.push(text.slice(start, end));
    start = end;
  }
  if (tokens.length === 0) return [];
  if (start < text.length) tokens[tokens.length - 1] += text.slice(start);
  return tokens;
}

/** Number of whitespace-delimited words. */
export function wordCount(text: string): number {
  return text.match(/\S+/g)?.length ?? 0;
}

function partText(part: FakeContentPart): string {
  if (part.type === "text" && "text" in part && typeof part.text === "string") return part.text;
  if (part.type === "image_url") return "[image]";
  return `[${part.type}]`;
}

/** The text of a message's content: text parts echoed, image parts as `[image]`. */
function messageText(content: FakeMessage["content"]): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  return content.map(partText).join(" ");
}

/** Words across the text parts of every message (image parts do not count). */
function promptWords(messages: FakeMessage[]): number {
  let n = 0;
  for (const m of messages) {
    if (typeof m.content === "string") n += wordCount(m.content);
    else if (Array.isArray(m.content)) {
      for (const p of m.content) {
        if (p.type === "text" && "text" in p && typeof p.text === "string") n += wordCount(p.text);
      }
    }
  }
  return n;
}

function lastUserText(messages: FakeMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role === "user") return messageText(m.content);
  }
  return "";
}

/** Cuts `text` before the earliest stop string; null when none occurs. */
function cutAtStop(
  text: string,
  stop: string | string[] | null | undefined,
): { text: string; matched: string } | null {
  const stops = stop === null || stop === undefined ? [] : typeof stop === "string" ? [stop] : stop;
  let cut = -1;
  let matched = "";
  for (const s of stops) {
    if (s === "") continue;
    const at = text.indexOf(s);
    if (at >= 0 && (cut < 0 || at < cut)) {
      cut = at;
      matched = s;
    }
  }
  return cut < 0 ? null : { text: text.slice(0, cut), matched };
}

/** Applies stop strings, then the token limit, to a reply text. */
function limitReply(
  text: string,
  stop: string | string[] | null | undefined,
  maxTokens: number | null,
): CompletionChoicePlan {
  const cut = cutAtStop(text, stop);
  const tokens = tokenize(cut?.text ?? text);
  if (maxTokens !== null && tokens.length > maxTokens) {
    return { tokens: tokens.slice(0, maxTokens), finishReason: "length" };
  }
  return cut ? { tokens, finishReason: "stop", stopMatched: cut.matched } : {
    tokens,
    finishReason: "stop",
  };
}

function fragments(text: string): string[] {
  const chars = Array.from(text);
  const out: string[] = [];
  for (let i = 0; i < chars.length; i += ARGUMENT_FRAGMENT_CHARS) {
    out.push(chars.slice(i, i + ARGUMENT_FRAGMENT_CHARS).join(""));
  }
  return out;
}

/** Which tool the model calls, if any (a tool result as last message never triggers one). */
function chooseTool(req: FakeChatRequest, userText: string): string | null {
  const tools = req.tools ?? [];
  const choice = req.tool_choice ?? "auto";
  const last = req.messages[req.messages.length - 1];
  if (tools.length === 0 || choice === "none" || last?.role === "tool") return null;
  const names = tools.map((t) => t.function.name);
  if (typeof choice === "object") {
    if (!names.includes(choice.function.name)) {
      throw badParam("tool_choice", "tool_choice names a function that is not in tools");
    }
    return choice.function.name;
  }
  // Longest name first, so "call get_weather_v2" is not taken for "get_weather".
  const byLength = [...names].sort((a, b) => b.length - a.length);
  const mentioned = byLength.find((n) => userText.includes(`call ${n}`));
  if (mentioned !== undefined) return mentioned;
  return choice === "required" ? names[0] ?? null : null;
}

/** A small JSON value of the schema's type, for json_schema replies. */
function sampleFor(schema: unknown, text: string): unknown {
  if (schema === null || typeof schema !== "object") return text;
  const type = "type" in schema ? schema.type : undefined;
  switch (type) {
    case "object":
      return sampleObject(schema, text);
    case "array":
      return [];
    case "number":
    case "integer":
      return wordCount(text);
    case "boolean":
      return true;
    case "null":
      return null;
    default:
      return text;
  }
}

function sampleObject(schema: object, text: string): Record<string, unknown> {
  const props = "properties" in schema ? schema.properties : undefined;
  if (props === null || typeof props !== "object") return { echo: text };
  const out: Record<string, unknown> = {};
  for (const [key, sub] of Object.entries(props)) out[key] = sampleFor(sub, text);
  return out;
}

function replyText(req: FakeChatRequest, userText: string): { text: string; subject: string } {
  const last = req.messages[req.messages.length - 1];
  if (last?.role === "tool") {
    const said = messageText(last.content);
    return { text: `Tool said: ${said}`, subject: said };
  }
  const format = req.response_format?.type;
  if (format === "json_object") {
    return { text: JSON.stringify({ echo: userText }), subject: userText };
  }
  if (format === "json_schema") {
    const schema = req.response_format?.json_schema?.schema;
    const obj = schema ? sampleObject(schema, userText) : { echo: userText };
    return { text: JSON.stringify(obj), subject: userText };
  }
  return { text: `Echo: ${userText}`, subject: userText };
}

function usageOf(prompt: number, completion: number, reasoning: number): ChatUsage {
  const usage: ChatUsage = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
  };
  if (reasoning > 0) usage.completion_tokens_details = { reasoning_tokens: reasoning };
  return usage;
}

/**
 * Plans the reply to a chat request. Reasoning tokens are not cut by the
 * token limit (it bounds the visible reply) but count in completion_tokens.
 */
export function planChat(req: FakeChatRequest): ChatPlan {
  const userText = lastUserText(req.messages);
  const maxTokens = req.max_completion_tokens ?? req.max_tokens ?? null;
  const toolName = chooseTool(req, userText);
  const { text, subject } = replyText(req, userText);
  const reasons = req.reasoning_effort != null || req.model.includes("reason");
  const reasoning = reasons ? tokenize(`Considering: ${subject}`) : [];
  const prompt = promptWords(req.messages);

  if (toolName !== null) {
    const all = fragments(JSON.stringify({ query: userText }));
    const cut = maxTokens !== null && all.length > maxTokens;
    const argumentFragments = cut ? all.slice(0, maxTokens) : all;
    return {
      reasoning,
      content: [],
      toolCall: { name: toolName, argumentFragments },
      finishReason: cut ? "length" : "tool_calls",
      usage: usageOf(prompt, reasoning.length + argumentFragments.length, reasoning.length),
    };
  }
  const reply = limitReply(text, req.stop, maxTokens);
  return {
    reasoning,
    content: reply.tokens,
    toolCall: null,
    finishReason: reply.finishReason,
    ...(reply.stopMatched !== undefined ? { stopMatched: reply.stopMatched } : {}),
    usage: usageOf(prompt, reasoning.length + reply.tokens.length, reasoning.length),
  };
}

/** Plans the reply to a legacy completions request: one choice per prompt. */
export function planCompletion(req: FakeCompletionRequest): CompletionPlan {
  const prompts = typeof req.prompt === "string" ? [req.prompt] : req.prompt;
  const choices = prompts.map((p) => limitReply(`Echo: ${p}`, req.stop, req.max_tokens ?? null));
  const prompt = prompts.reduce((n, p) => n + wordCount(p), 0);
  const completion = choices.reduce((n, c) => n + c.tokens.length, 0);
  return { choices, usage: usageOf(prompt, completion, 0) };
}
