/**
 * OpenAI chat response → OpenAI Responses object (non-streaming).
 * Output order: reasoning, message, function calls. When the response is
 * `incomplete` (token limit or content filter) its last item — the one that
 * was cut — is marked `incomplete`. `output_text` is not sent: the SDKs
 * compute it from the output items, as the real API expects them to.
 */

import type { ChatResponse } from "../chat/types.ts";
import { buildResponse, itemIdFor, responseIdFor, statusFor, toResponsesUsage } from "./build.ts";
import {
  DEFAULT_ECHO,
  type ResponsesEcho,
  type ResponsesOutputItem,
  type ResponsesResponse,
} from "./types.ts";

export interface ResponsesResponseOptions {
  /** Unix seconds (the gateway's clock, passed in). */
  createdAt: number;
  /** Request settings to echo (from `parseResponsesRequest(...).echo`). */
  echo?: ResponsesEcho;
  /** Use this id instead of deriving one from the chat id. */
  id?: string;
}

export function chatToResponsesResponse(
  chat: ChatResponse,
  model: string,
  opts: ResponsesResponseOptions,
): ResponsesResponse {
  const id = opts.id ?? responseIdFor(chat.id);
  const choice = chat.choices[0];
  const msg = choice?.message;
  const { status, incomplete } = statusFor(choice?.finish_reason);
  const output: ResponsesOutputItem[] = [];
  if (msg?.reasoning_content) {
    output.push({
      type: "reasoning",
      id: itemIdFor("rs", id, output.length),
      summary: [],
      content: [{ type: "reasoning_text", text: msg.reasoning_content }],
      status: "completed",
    });
  }
  if (typeof msg?.content === "string" && msg.content !== "") {
    output.push({
      type: "message",
      id: itemIdFor("msg", id, output.length),
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: msg.content, annotations: [], logprobs: [] }],
    });
  }
  for (const call of msg?.tool_calls ?? []) {
    const fcId = itemIdFor("fc", id, output.length);
    output.push({
      type: "function_call",
      id: fcId,
      call_id: call.id !== "" ? call.id : fcId,
      name: call.function.name,
      arguments: call.function.arguments,
      status: "completed",
    });
  }
  const last = output[output.length - 1];
  if (status === "incomplete" && last) last.status = "incomplete";
  const usage = chat.usage ? toResponsesUsage(chat.usage) : null;
  return buildResponse(
    { id, createdAt: opts.createdAt, model, echo: opts.echo ?? DEFAULT_ECHO },
    status,
    output,
    usage,
    incomplete ? { incomplete } : {},
  );
}
