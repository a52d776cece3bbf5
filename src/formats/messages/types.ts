/**
 * Anthropic Messages wire shapes the gateway produces (a subset of the SDK's
 * `Message` and stream event types, with the fields the SDK reads).
 */

import type { AnthropicStopReason } from "./stop_reason.ts";

export type MessagesContentBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> };

export interface MessagesUsage {
  input_tokens: number;
  output_tokens: number;
  /** The gateway reports no cache accounting in Anthropic terms. */
  cache_creation_input_tokens: null;
  cache_read_input_tokens: null;
}

export interface MessagesResponse {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: MessagesContentBlock[];
  stop_reason: AnthropicStopReason | null;
  stop_sequence: string | null;
  usage: MessagesUsage;
}
