/**
 * OpenAI chat-completions wire types: the canonical request/response shape the
 * gateway speaks to upstreams. The messages and responses adapters translate
 * to and from these; they are plain data (no classes) so they JSON-serialize as-is.
 */

export type JsonValue =
  | string
  | number
  | boolean
  | null
  | JsonValue[]
  | { [key: string]: JsonValue };

export type ChatContentPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string; detail?: string } };

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type ChatMessage =
  | { role: "system" | "developer"; content: string | ChatContentPart[]; name?: string }
  | { role: "user"; content: string | ChatContentPart[]; name?: string }
  | {
    role: "assistant";
    content: string | ChatContentPart[] | null;
    tool_calls?: ChatToolCall[];
    reasoning_content?: string;
    name?: string;
  }
  | { role: "tool"; content: string | ChatContentPart[]; tool_call_id: string };

export interface ChatTool {
  type: "function";
  function: {
    name: string;
    description?: string;
    parameters?: Record<string, unknown>;
    strict?: boolean;
  };
}

export type ChatToolChoice =
  | "auto"
  | "none"
  | "required"
  | { type: "function"; function: { name: string } };

/** The chat request as forwarded upstream (the `provider` block already removed). */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  temperature?: number;
  top_p?: number;
  n?: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  stop?: string | string[];
  presence_penalty?: number;
  frequency_penalty?: number;
  tools?: ChatTool[];
  tool_choice?: ChatToolChoice;
  parallel_tool_calls?: boolean;
  response_format?: Record<string, unknown>;
  reasoning_effort?: string;
  top_k?: number;
  seed?: number;
  user?: string;
  metadata?: Record<string, unknown>;
}

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "function_call";

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
}

export interface ChatChoice {
  index: number;
  message: {
    role: "assistant";
    content: string | null;
    tool_calls?: ChatToolCall[];
    reasoning_content?: string;
    refusal?: string | null;
  };
  finish_reason: FinishReason | null;
  logprobs?: null;
  /** vLLM: the matched stop string (or token id) that ended the choice. */
  stop_reason?: string | number | null;
}

export interface ChatResponse {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: ChatChoice[];
  usage?: ChatUsage;
  system_fingerprint?: string | null;
}

export interface ChatToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function?: { name?: string; arguments?: string };
}

export interface ChatChunkChoice {
  index: number;
  delta: {
    role?: "assistant";
    content?: string | null;
    reasoning_content?: string | null;
    tool_calls?: ChatToolCallDelta[];
  };
  finish_reason: FinishReason | null;
  logprobs?: null;
  /** vLLM: the matched stop string (or token id) that ended the choice. */
  stop_reason?: string | number | null;
}

export interface ChatChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: ChatChunkChoice[];
  usage?: ChatUsage | null;
}
