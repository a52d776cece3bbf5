/**
 * Streaming translator: OpenAI chat chunks → Anthropic Messages SSE events.
 *
 * Order: `message_start`, then content blocks with contiguous indices (one open
 * at a time: thinking / text / tool_use), then `message_delta` and
 * `message_stop`, both only in `end()` — upstreams often send the usage chunk
 * after the finish chunk, and usage must land in `message_delta`.
 *
 * Usage: `message_start` is written before the upstream reports any usage, so
 * it carries the gateway's own prompt-token count (`inputTokensEstimate`,
 * counted with the model's tokenizer), and `message_delta` repeats that same
 * `input_tokens`: a client sees one input count per stream
 * (docs/decisions/anthropic-stream-input-tokens.md). Billing and the receipt
 * use the upstream's `prompt_tokens` (`usage()`). Without an upstream usage
 * chunk, output tokens are estimated as the number of content-bearing deltas
 * (upstreams stream about one token per chunk).
 *
 * Tool calls are streamed live; an upstream that interleaves argument
 * fragments of two calls cannot be expressed as sequential Anthropic blocks,
 * so that throws an `upstream_error` for the gateway to turn into `fail()`.
 */

import type { ChatChunk, ChatChunkChoice, FinishReason } from "../chat/types.ts";
import { errorBody, GatewayError } from "../../http/mod.ts";
import { encodeSseEvent } from "../sse.ts";
import type { StreamTranslator } from "../stream_translator.ts";
import { messageIdFor, toolUseIdFor } from "./ids.ts";
import { mapStopReason, matchedStopString } from "./stop_reason.ts";

export interface MessagesStreamOptions {
  /** Model name echoed to the client (the name it asked for). */
  model: string;
  /** Prompt tokens the gateway counted before forwarding; reported in `message_start`. */
  inputTokensEstimate: number;
  stopSequences?: readonly string[];
  /** `usage.cost` in credits on `message_delta` (OpenRouter's field, as on whole answers). */
  cost?: (u: { prompt_tokens: number; completion_tokens: number }) => number;
}

interface ToolState {
  id?: string;
  name?: string;
  /** Arguments received before the name (nothing can be opened yet). */
  pendingArgs: string;
  blockIndex?: number;
}

type OpenBlock = { kind: "text" | "thinking"; index: number } | {
  kind: "tool";
  index: number;
  tool: number;
};

function ev(type: string, body: Record<string, unknown>): string {
  return encodeSseEvent(type, { type, ...body });
}

class MessagesStreamTranslator implements StreamTranslator {
  readonly #opts: MessagesStreamOptions;
  #id = "";
  #started = false;
  #done = false;
  #nextIndex = 0;
  #open: OpenBlock | null = null;
  readonly #tools = new Map<number, ToolState>();
  #finish: FinishReason | null = null;
  #matched: string | undefined;
  #sawToolCalls = false;
  #promptTokens: number | undefined;
  #completionTokens: number | undefined;
  #deltas = 0;
  #sawChunk = false;

  constructor(opts: MessagesStreamOptions) {
    if (!Number.isInteger(opts.inputTokensEstimate) || opts.inputTokensEstimate < 0) {
      throw new RangeError("inputTokensEstimate must be a non-negative integer");
    }
    this.#opts = opts;
  }

  #start(chatId: string | undefined): string {
    if (this.#started) return "";
    this.#started = true;
    this.#id = messageIdFor(chatId);
    return ev("message_start", {
      message: {
        id: this.#id,
        type: "message",
        role: "assistant",
        content: [],
        model: this.#opts.model,
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: this.#opts.inputTokensEstimate,
          output_tokens: 0,
          cache_creation_input_tokens: null,
          cache_read_input_tokens: null,
        },
      },
    });
  }

  #close(): string {
    if (this.#open === null) return "";
    const index = this.#open.index;
    this.#open = null;
    return ev("content_block_stop", { index });
  }

  #openBlock(kind: "text" | "thinking"): string {
    if (this.#open?.kind === kind) return "";
    let out = this.#close();
    const index = this.#nextIndex++;
    this.#open = { kind, index };
    const block = kind === "text"
      ? { type: "text", text: "" }
      : { type: "thinking", thinking: "", signature: "" };
    out += ev("content_block_start", { index, content_block: block });
    return out;
  }

  #openTool(toolIndex: number, st: ToolState): string {
    let out = this.#close();
    const index = this.#nextIndex++;
    st.blockIndex = index;
    this.#open = { kind: "tool", index, tool: toolIndex };
    this.#sawToolCalls = true;
    out += ev("content_block_start", {
      index,
      content_block: {
        type: "tool_use",
        id: st.id ?? toolUseIdFor(this.#id, toolIndex),
        name: st.name ?? "",
        input: {},
      },
    });
    if (st.pendingArgs !== "") {
      out += this.#argsDelta(index, st.pendingArgs);
      st.pendingArgs = "";
    }
    return out;
  }

  #argsDelta(index: number, partial: string): string {
    this.#deltas++;
    return ev("content_block_delta", {
      index,
      delta: { type: "input_json_delta", partial_json: partial },
    });
  }

  #choice(choice: ChatChunkChoice): string {
    let out = "";
    const d = choice.delta;
    if (typeof d.reasoning_content === "string" && d.reasoning_content !== "") {
      out += this.#openBlock("thinking");
      this.#deltas++;
      out += ev("content_block_delta", {
        index: this.#nextIndex - 1,
        delta: { type: "thinking_delta", thinking: d.reasoning_content },
      });
    }
    if (typeof d.content === "string" && d.content !== "") {
      out += this.#openBlock("text");
      this.#deltas++;
      out += ev("content_block_delta", {
        index: this.#nextIndex - 1,
        delta: { type: "text_delta", text: d.content },
      });
    }
    for (const tc of d.tool_calls ?? []) {
      let st = this.#tools.get(tc.index);
      if (st === undefined) {
        st = { pendingArgs: "" };
        this.#tools.set(tc.index, st);
      }
      if (tc.id !== undefined && tc.id !== "" && st.id === undefined) st.id = tc.id;
      const name = tc.function?.name;
      if (st.blockIndex === undefined && typeof name === "string" && name !== "") st.name = name;
      const args = tc.function?.arguments ?? "";
      if (st.blockIndex === undefined) {
        st.pendingArgs += args;
        if (st.name !== undefined) out += this.#openTool(tc.index, st);
        continue;
      }
      if (args === "") continue;
      if (this.#open?.kind !== "tool" || this.#open.tool !== tc.index) {
        throw new GatewayError("upstream_error", "upstream interleaved tool call arguments");
      }
      out += this.#argsDelta(st.blockIndex, args);
    }
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.#finish = choice.finish_reason;
      this.#matched = matchedStopString(choice);
    }
    return out;
  }

  chunk(c: ChatChunk): string {
    if (this.#done) return "";
    this.#sawChunk = true;
    let out = this.#start(c.id);
    if (c.usage) {
      this.#promptTokens = c.usage.prompt_tokens;
      this.#completionTokens = c.usage.completion_tokens;
    }
    for (const choice of c.choices) {
      if (choice.index === 0) out += this.#choice(choice);
    }
    return out;
  }

  end(): string {
    if (this.#done) return "";
    this.#done = true;
    let out = this.#start(undefined);
    // Tool calls that never got a name are still surfaced rather than lost.
    for (const [toolIndex, st] of this.#tools) {
      if (st.blockIndex === undefined) out += this.#openTool(toolIndex, st);
    }
    out += this.#close();
    if (this.#nextIndex === 0) {
      out += ev("content_block_start", {
        index: 0,
        content_block: { type: "text", text: "" },
      });
      out += ev("content_block_stop", { index: 0 });
    }
    const stop = mapStopReason(
      this.#finish,
      this.#sawToolCalls,
      this.#matched,
      this.#opts.stopSequences ?? [],
    );
    const u = this.#totals();
    out += ev("message_delta", {
      delta: { stop_reason: stop.stop_reason, stop_sequence: stop.stop_sequence },
      usage: {
        input_tokens: this.#opts.inputTokensEstimate,
        output_tokens: u.completion_tokens,
        ...(this.#opts.cost ? { cost: this.#opts.cost(u) } : {}),
      },
    });
    out += ev("message_stop", {});
    return out;
  }

  fail(err: GatewayError): string {
    if (this.#done) return "";
    this.#done = true;
    return encodeSseEvent("error", errorBody(err, "anthropic"));
  }

  keepAlive(): string {
    if (this.#done) return "";
    return ev("ping", {});
  }

  #totals(): { prompt_tokens: number; completion_tokens: number } {
    return {
      prompt_tokens: this.#promptTokens ?? this.#opts.inputTokensEstimate,
      completion_tokens: this.#completionTokens ?? this.#deltas,
    };
  }

  usage(): { prompt_tokens: number; completion_tokens: number } | undefined {
    // Nothing reached the upstream's output yet: nothing to bill from this stream.
    if (!this.#sawChunk) return undefined;
    return this.#totals();
  }
}

/** A fresh translator for one streamed `/v1/messages` request. */
export function createMessagesStreamTranslator(opts: MessagesStreamOptions): StreamTranslator {
  return new MessagesStreamTranslator(opts);
}
