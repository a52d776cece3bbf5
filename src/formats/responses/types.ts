/**
 * OpenAI Responses wire shapes the gateway produces, matching the fields of the
 * official SDK's `Response`, output item and usage types that clients read.
 */

import type { FunctionTool, TextFormat, ToolChoice } from "./schema.ts";

export type ItemStatus = "in_progress" | "completed" | "incomplete";

export interface OutputTextPart {
  type: "output_text";
  text: string;
  annotations: [];
  logprobs: [];
}

export interface ReasoningOutputItem {
  type: "reasoning";
  id: string;
  summary: [];
  content: Array<{ type: "reasoning_text"; text: string }>;
  status: ItemStatus;
}

export interface MessageOutputItem {
  type: "message";
  id: string;
  status: ItemStatus;
  role: "assistant";
  content: OutputTextPart[];
}

export interface FunctionCallOutputItem {
  type: "function_call";
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: ItemStatus;
}

export type ResponsesOutputItem = ReasoningOutputItem | MessageOutputItem | FunctionCallOutputItem;

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export type ResponsesStatus = "in_progress" | "completed" | "incomplete" | "failed";

/** Request settings a Response object echoes back (the SDK types require them). */
export interface ResponsesEcho {
  instructions: string | null;
  tools: FunctionTool[];
  tool_choice: ToolChoice;
  temperature: number | null;
  top_p: number | null;
  parallel_tool_calls: boolean;
  max_output_tokens: number | null;
  metadata: Record<string, string>;
  text: { format: TextFormat };
  reasoning: { effort: string | null; summary: null };
  user?: string;
}

export interface ResponsesResponse extends Omit<ResponsesEcho, "user"> {
  id: string;
  object: "response";
  created_at: number;
  status: ResponsesStatus;
  background: false;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: "max_output_tokens" | "content_filter" } | null;
  model: string;
  output: ResponsesOutputItem[];
  previous_response_id: null;
  store: false;
  truncation: "disabled";
  usage: ResponsesUsage | null;
  user?: string;
}

/** Echo used when the caller has none (e.g. tests, or a response built without its request). */
export const DEFAULT_ECHO: ResponsesEcho = {
  instructions: null,
  tools: [],
  tool_choice: "auto",
  temperature: null,
  top_p: null,
  parallel_tool_calls: true,
  max_output_tokens: null,
  metadata: {},
  text: { format: { type: "text" } },
  reasoning: { effort: null, summary: null },
};
