/**
 * Renders fake-model plans as OpenAI wire objects: `chat.completion`, the
 * `chat.completion.chunk` sequence of a stream, and the legacy
 * `text_completion` object and chunks. Pure: ids and timestamps come in `meta`.
 */
import type {
  ChatChunk,
  ChatChunkChoice,
  ChatResponse,
  ChatToolCall,
  ChatUsage,
} from "../formats/mod.ts";
import type { ChatPlan, CompletionPlan } from "./fake_model.ts";

/** Identity of one response: `created` is in epoch seconds. */
export interface RenderMeta {
  id: string;
  created: number;
  model: string;
}

/**
 * Where a stream carries usage: nowhere, in a `choices: []` chunk after the
 * finish chunk (OpenAI's `include_usage`), or inside the finish chunk itself.
 */
export type UsageMode = "none" | "after_finish" | "in_finish";

/** Stream quirks a real upstream may show. */
export interface ChunkOptions {
  usage: UsageMode;
  /** Add `tool_calls: []` to every delta that carries no tool call (a known upstream quirk). */
  emptyToolCalls: boolean;
}

/** The tool call id of a response: derived from the response id, so unique per response. */
export function toolCallId(responseId: string): string {
  return `call_${responseId.replace(/^chatcmpl-/, "")}`;
}

/** The non-streamed `chat.completion` for a plan. */
export function renderChatCompletion(
  plan: ChatPlan,
  meta: RenderMeta,
  opts: { emptyToolCalls: boolean },
): ChatResponse {
  const message: ChatResponse["choices"][number]["message"] = {
    role: "assistant",
    content: plan.toolCall ? null : plan.content.join(""),
    refusal: null,
  };
  if (plan.reasoning.length > 0) message.reasoning_content = plan.reasoning.join("");
  if (plan.toolCall) {
    const call: ChatToolCall = {
      id: toolCallId(meta.id),
      type: "function",
      function: { name: plan.toolCall.name, arguments: plan.toolCall.argumentFragments.join("") },
    };
    message.tool_calls = [call];
  } else if (opts.emptyToolCalls) {
    message.tool_calls = [];
  }
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    choices: [{
      index: 0,
      message,
      finish_reason: plan.finishReason,
      logprobs: null,
      ...(plan.stopMatched !== undefined ? { stop_reason: plan.stopMatched } : {}),
    }],
    usage: plan.usage,
  };
}

/** The chunks of a streamed chat completion, in order (without the `[DONE]` sentinel). */
export function renderChatChunks(
  plan: ChatPlan,
  meta: RenderMeta,
  opts: ChunkOptions,
): ChatChunk[] {
  const chunks: ChatChunk[] = [];
  const push = (delta: ChatChunkChoice["delta"], finish: ChatChunkChoice["finish_reason"]) => {
    if (opts.emptyToolCalls && delta.tool_calls === undefined) delta.tool_calls = [];
    const chunk: ChatChunk = {
      id: meta.id,
      object: "chat.completion.chunk",
      created: meta.created,
      model: meta.model,
      choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
    };
    // With include_usage, OpenAI marks every non-usage chunk `usage: null`.
    if (opts.usage === "after_finish") chunk.usage = null;
    chunks.push(chunk);
    return chunk;
  };

  push({ role: "assistant", content: "" }, null);
  for (const token of plan.reasoning) push({ reasoning_content: token }, null);
  if (plan.toolCall) {
    push({
      tool_calls: [{
        index: 0,
        id: toolCallId(meta.id),
        type: "function",
        function: { name: plan.toolCall.name, arguments: "" },
      }],
    }, null);
    for (const fragment of plan.toolCall.argumentFragments) {
      push({ tool_calls: [{ index: 0, function: { arguments: fragment } }] }, null);
    }
  } else {
    for (const token of plan.content) push({ content: token }, null);
  }
  const finish = push({}, plan.finishReason);
  if (plan.stopMatched !== undefined) finish.choices[0].stop_reason = plan.stopMatched;
  if (opts.usage === "in_finish") finish.usage = plan.usage;
  if (opts.usage === "after_finish") {
    chunks.push({
      id: meta.id,
      object: "chat.completion.chunk",
      created: meta.created,
      model: meta.model,
      choices: [],
      usage: plan.usage,
    });
  }
  return chunks;
}

/** One choice of a legacy `text_completion` (whole or chunk). */
export interface TextCompletionChoice {
  text: string;
  index: number;
  logprobs: null;
  finish_reason: "stop" | "length" | null;
}

/** A legacy `text_completion` object or stream chunk. */
export interface TextCompletion {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: TextCompletionChoice[];
  usage?: ChatUsage | null;
}

/** The non-streamed legacy completion for a plan. */
export function renderTextCompletion(plan: CompletionPlan, meta: RenderMeta): TextCompletion {
  return {
    id: meta.id,
    object: "text_completion",
    created: meta.created,
    model: meta.model,
    choices: plan.choices.map((c, index) => ({
      text: c.tokens.join(""),
      index,
      logprobs: null,
      finish_reason: c.finishReason,
    })),
    usage: plan.usage,
  };
}

/** The chunks of a streamed legacy completion: choices one after another, then usage. */
export function renderTextCompletionChunks(
  plan: CompletionPlan,
  meta: RenderMeta,
  opts: { usage: UsageMode },
): TextCompletion[] {
  const chunks: TextCompletion[] = [];
  const push = (choice: TextCompletionChoice) => {
    const chunk: TextCompletion = {
      id: meta.id,
      object: "text_completion",
      created: meta.created,
      model: meta.model,
      choices: [choice],
    };
    if (opts.usage === "after_finish") chunk.usage = null;
    chunks.push(chunk);
    return chunk;
  };
  plan.choices.forEach((c, index) => {
    for (const text of c.tokens) push({ text, index, logprobs: null, finish_reason: null });
    const finish = push({ text: "", index, logprobs: null, finish_reason: c.finishReason });
    if (opts.usage === "in_finish" && index === plan.choices.length - 1) finish.usage = plan.usage;
  });
  if (opts.usage === "after_finish") {
    chunks.push({
      id: meta.id,
      object: "text_completion",
      created: meta.created,
      model: meta.model,
      choices: [],
      usage: plan.usage,
    });
  }
  return chunks;
}
