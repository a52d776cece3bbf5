/**
 * Chat `finish_reason` → Anthropic `stop_reason` / `stop_sequence`.
 *
 * Chat upstreams strip a matched stop sequence from the text, so the text alone
 * cannot tell whether one matched. vLLM-style upstreams add a non-standard
 * `stop_reason` field on the choice holding the matched string (SGLang:
 * `matched_stop`); only when that string is one the client asked for do we
 * report `stop_sequence`. Otherwise a `stop` finish is `end_turn` with
 * `stop_sequence: null` — never a guess.
 */

import type { FinishReason } from "../chat/types.ts";

export type AnthropicStopReason =
  | "end_turn"
  | "max_tokens"
  | "stop_sequence"
  | "tool_use"
  | "refusal";

/** The matched stop string an upstream reported on a choice, if any (read defensively). */
export function matchedStopString(choice: object): string | undefined {
  const c = choice as { stop_reason?: unknown; matched_stop?: unknown };
  for (const v of [c.stop_reason, c.matched_stop]) {
    if (typeof v === "string" && v !== "") return v;
  }
  return undefined;
}

export function mapStopReason(
  finish: FinishReason | null | undefined,
  sawToolCalls: boolean,
  matched: string | undefined,
  stopSequences: readonly string[],
): { stop_reason: AnthropicStopReason; stop_sequence: string | null } {
  switch (finish) {
    case "length":
      return { stop_reason: "max_tokens", stop_sequence: null };
    case "tool_calls":
    case "function_call":
      return { stop_reason: "tool_use", stop_sequence: null };
    case "content_filter":
      return { stop_reason: "refusal", stop_sequence: null };
    default:
      // Some upstreams finish with "stop" even after emitting tool calls.
      if (sawToolCalls) return { stop_reason: "tool_use", stop_sequence: null };
      if (matched !== undefined && stopSequences.includes(matched)) {
        return { stop_reason: "stop_sequence", stop_sequence: matched };
      }
      return { stop_reason: "end_turn", stop_sequence: null };
  }
}
