/**
 * Test-only helpers shared by the format adapter tests: upstream chat chunk
 * builders and an SSE round-trip through the gateway's own decoder.
 */

import type { ChatChunk, ChatToolCallDelta, ChatUsage, FinishReason } from "../chat/types.ts";
import { SseDecoder } from "../sse.ts";

let counter = 0;

/** One upstream chunk with a single choice delta. */
export function delta(
  d: {
    role?: "assistant";
    content?: string | null;
    reasoning_content?: string | null;
    tool_calls?: ChatToolCallDelta[];
  },
  finish: FinishReason | null = null,
  extra: Record<string, unknown> = {},
): ChatChunk {
  counter++;
  return {
    id: "chatcmpl-test",
    object: "chat.completion.chunk",
    created: 1700000000 + counter,
    model: "upstream-model",
    choices: [{ index: 0, delta: d, finish_reason: finish, ...extra }],
  };
}

/** The `include_usage` tail chunk: no choices, only usage. */
export function usageChunk(
  prompt: number,
  completion: number,
  more: Partial<ChatUsage> = {},
): ChatChunk {
  return {
    id: "chatcmpl-test",
    object: "chat.completion.chunk",
    created: 1700000100,
    model: "upstream-model",
    choices: [],
    usage: {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      ...more,
    },
  };
}

export interface DecodedEvent {
  event: string | undefined;
  data: Record<string, unknown>;
}

/** Decode SSE text with the gateway's decoder, JSON-parsing every data payload. */
export function decodeEvents(sse: string): DecodedEvent[] {
  const dec = new SseDecoder();
  const bytes = new TextEncoder().encode(sse);
  // Feed in small uneven slices to exercise the incremental path.
  const events = [];
  for (let i = 0; i < bytes.length; i += 7) events.push(...dec.push(bytes.subarray(i, i + 7)));
  events.push(...dec.end());
  return events.map((e) => {
    const data: unknown = JSON.parse(e.data);
    if (typeof data !== "object" || data === null || Array.isArray(data)) {
      throw new Error("SSE data is not a JSON object");
    }
    return { event: e.event, data: data as Record<string, unknown> };
  });
}

/** Just the `type`s, in order. */
export function types(events: DecodedEvent[]): string[] {
  return events.map((e) => String(e.data.type));
}
