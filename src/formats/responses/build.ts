/**
 * Builders shared by the non-streaming and streaming Responses paths: ids,
 * usage conversion and the Response object envelope, so both paths emit the
 * exact same shape.
 */

import { createHash, randomUUID } from "node:crypto";
import type { ChatUsage } from "../chat/types.ts";
import type {
  ResponsesEcho,
  ResponsesOutputItem,
  ResponsesResponse,
  ResponsesStatus,
  ResponsesUsage,
} from "./types.ts";

function digest(seed: string): string {
  return createHash("sha256").update(seed).digest("hex").slice(0, 32);
}

/** `resp_…` from the upstream chat id (deterministic) or, without one, random. */
export function responseIdFor(chatId: string | undefined): string {
  return "resp_" + digest(chatId !== undefined && chatId !== "" ? chatId : randomUUID());
}

/** Output item ids derive from the response id and the item's output index. */
export function itemIdFor(
  prefix: "msg" | "fc" | "rs",
  responseId: string,
  outputIndex: number,
): string {
  return `${prefix}_` + digest(`${responseId}:${outputIndex}`);
}

export function toResponsesUsage(u: {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: ChatUsage["prompt_tokens_details"];
  completion_tokens_details?: ChatUsage["completion_tokens_details"];
}): ResponsesUsage {
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: u.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: u.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: u.prompt_tokens + u.completion_tokens,
  };
}

export interface ResponseEnvelope {
  id: string;
  /** Unix seconds. */
  createdAt: number;
  model: string;
  echo: ResponsesEcho;
}

export function buildResponse(
  env: ResponseEnvelope,
  status: ResponsesStatus,
  output: ResponsesOutputItem[],
  usage: ResponsesUsage | null,
  extra: {
    incomplete?: "max_output_tokens" | "content_filter";
    error?: { code: string; message: string };
  } = {},
): ResponsesResponse {
  const { user, ...echo } = env.echo;
  return {
    id: env.id,
    object: "response",
    created_at: env.createdAt,
    status,
    background: false,
    error: extra.error ?? null,
    incomplete_details: extra.incomplete ? { reason: extra.incomplete } : null,
    ...echo,
    model: env.model,
    output,
    previous_response_id: null,
    store: false,
    truncation: "disabled",
    usage,
    ...(user !== undefined ? { user } : {}),
  };
}

/** Responses status for a chat finish reason. */
export function statusFor(
  finish: string | null | undefined,
): { status: "completed" | "incomplete"; incomplete?: "max_output_tokens" | "content_filter" } {
  if (finish === "length") return { status: "incomplete", incomplete: "max_output_tokens" };
  if (finish === "content_filter") return { status: "incomplete", incomplete: "content_filter" };
  return { status: "completed" };
}
