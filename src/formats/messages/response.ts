/**
 * OpenAI chat response → Anthropic Messages response (non-streaming).
 * Content order follows Anthropic: thinking, then text, then tool_use blocks.
 * A reply with no content at all still gets one empty text block, because many
 * clients read `content[0].text` unconditionally.
 */

import type { ChatResponse } from "../chat/types.ts";
import { messageIdFor, toolUseIdFor } from "./ids.ts";
import { mapStopReason, matchedStopString } from "./stop_reason.ts";
import type { MessagesContentBlock, MessagesResponse } from "./types.ts";

/** Tool arguments as an object; anything that is not a JSON object becomes `{}` (never a crash). */
export function parseToolInput(args: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(args);
    if (typeof v === "object" && v !== null && !Array.isArray(v)) {
      return v as Record<string, unknown>;
    }
  } catch {
    // fall through: malformed arguments from the model
  }
  return {};
}

export function chatToMessagesResponse(
  chat: ChatResponse,
  model: string,
  stopSequences: readonly string[] = [],
): MessagesResponse {
  const choice = chat.choices[0];
  const content: MessagesContentBlock[] = [];
  const msg = choice?.message;
  if (msg?.reasoning_content) {
    content.push({ type: "thinking", thinking: msg.reasoning_content, signature: "" });
  }
  if (typeof msg?.content === "string" && msg.content !== "") {
    content.push({ type: "text", text: msg.content });
  }
  const id = messageIdFor(chat.id);
  const calls = msg?.tool_calls ?? [];
  calls.forEach((call, i) => {
    content.push({
      type: "tool_use",
      id: call.id !== "" ? call.id : toolUseIdFor(id, i),
      name: call.function.name,
      input: parseToolInput(call.function.arguments),
    });
  });
  if (content.length === 0) content.push({ type: "text", text: "" });
  const stop = mapStopReason(
    choice?.finish_reason,
    calls.length > 0,
    choice ? matchedStopString(choice) : undefined,
    stopSequences,
  );
  return {
    id,
    type: "message",
    role: "assistant",
    model,
    content,
    stop_reason: stop.stop_reason,
    stop_sequence: stop.stop_sequence,
    usage: {
      input_tokens: chat.usage?.prompt_tokens ?? 0,
      output_tokens: chat.usage?.completion_tokens ?? 0,
      cache_creation_input_tokens: null,
      cache_read_input_tokens: null,
    },
  };
}
