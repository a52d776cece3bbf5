/**
 * The contract every client-format stream adapter implements: the gateway feeds
 * parsed upstream chat-completion chunks in and writes the returned SSE text out.
 * Translators are pure state machines (no I/O, no clock), so they are tested
 * without a server and the gateway owns timing, keep-alive cadence and failover.
 */

import type { ChatChunk } from "./chat/types.ts";
import type { GatewayError } from "../http/mod.ts";

export interface StreamTranslator {
  /** Feed one parsed upstream chat chunk; returns the SSE text to write to the client (may be ""). */
  chunk(c: ChatChunk): string;
  /** Upstream ended cleanly (with or without [DONE]): returns the tail (final events). Idempotent-safe: calling twice returns "". */
  end(): string;
  /** Upstream failed mid-stream: returns the format's in-band error events (Anthropic `event: error`, Responses `response.failed`). */
  fail(err: GatewayError): string;
  /** A keep-alive frame for this format (see each adapter for what it sends and why). */
  keepAlive(): string;
  /** Usage seen so far (prompt/completion tokens), for billing, even if the stream was cut. */
  usage(): { prompt_tokens: number; completion_tokens: number } | undefined;
}

/** Token counts as upstreams report them. */
export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

/**
 * The streaming contract as the pipeline sees it: {@link StreamTranslator} with the chunk input
 * left untyped (pass-through translators take other chunk shapes).
 */
export interface Translator {
  /** One upstream SSE event's parsed data (and its `event:` name, when it had one). */
  chunk(c: never, event?: string): string;
  end(): string;
  fail(err: GatewayError): string;
  usage(): TokenUsage | undefined;
  /** A keep-alive frame for idle upstreams (formats that have a safe one). */
  keepAlive?(): string;
}
