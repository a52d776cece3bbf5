/**
 * Streaming translator: OpenAI chat chunks → OpenAI Responses SSE events.
 *
 * Every event carries `type` and a `sequence_number` counting from 0; there is
 * no `[DONE]`. One output item is open at a time (reasoning, message or
 * function_call); the final event (`response.completed`, `response.incomplete`
 * or `response.failed`) carries the full response with output and usage, and
 * is only written in `end()`/`fail()`, after a usage chunk that follows the
 * finish chunk has been seen.
 *
 * Keep-alive: the Responses format has no ping event, and SSE comments break
 * naive client parsers (a known gateway bug). Before the first event,
 * `keepAlive()` writes the real `response.created`/`response.in_progress`
 * events; afterwards it writes a bare "\n": an empty line that dispatches
 * nothing in any SSE parser yet keeps bytes flowing through idle-timeout proxies.
 *
 * An upstream interleaving argument fragments of two tool calls throws an
 * `upstream_error` (see the messages adapter) for the gateway to `fail()` with.
 */

import type { ChatChunk, ChatChunkChoice, ChatUsage, FinishReason } from "../chat/types.ts";
import { GatewayError } from "../../http/mod.ts";
import { encodeSseEvent } from "../sse.ts";
import type { StreamTranslator } from "../stream_translator.ts";
import {
  buildResponse,
  itemIdFor,
  type ResponseEnvelope,
  responseIdFor,
  statusFor,
  toResponsesUsage,
} from "./build.ts";
import {
  DEFAULT_ECHO,
  type ItemStatus,
  type ResponsesEcho,
  type ResponsesOutputItem,
  type ResponsesResponse,
} from "./types.ts";

export interface ResponsesStreamOptions {
  /** Model name echoed to the client. */
  model: string;
  /** Unix seconds (the gateway's clock, passed in). */
  createdAt: number;
  /** Request settings to echo (from `parseResponsesRequest(...).echo`). */
  echo?: ResponsesEcho;
  /** Response id; random `resp_…` when absent (events go out before any upstream id is known). */
  id?: string;
  /** Prompt tokens the gateway counted; used for `usage()` when the upstream never reports usage. */
  inputTokensEstimate?: number;
  /** `usage.cost` in credits on the final response (OpenRouter's field, as on whole answers). */
  cost?: (u: { prompt_tokens: number; completion_tokens: number }) => number;
}

interface ToolState {
  callId?: string;
  name?: string;
  pendingArgs: string;
  outputIndex?: number;
}

interface OpenItem {
  kind: "reasoning" | "message" | "function_call";
  outputIndex: number;
  id: string;
  text: string;
  tool?: number;
}

class ResponsesStreamTranslator implements StreamTranslator {
  readonly #env: ResponseEnvelope;
  readonly #estimate: number | undefined;
  #seq = 0;
  #started = false;
  #done = false;
  readonly #output: ResponsesOutputItem[] = [];
  #open: OpenItem | null = null;
  readonly #tools = new Map<number, ToolState>();
  #finish: FinishReason | null = null;
  #usage: ChatUsage | undefined;
  #deltas = 0;
  #sawChunk = false;
  readonly #cost: ResponsesStreamOptions["cost"];

  constructor(opts: ResponsesStreamOptions) {
    if (!Number.isFinite(opts.createdAt)) {
      throw new RangeError("createdAt must be a number (Unix seconds)");
    }
    const est = opts.inputTokensEstimate;
    if (est !== undefined && (!Number.isInteger(est) || est < 0)) {
      throw new RangeError("inputTokensEstimate must be a non-negative integer");
    }
    this.#estimate = est;
    this.#cost = opts.cost;
    this.#env = {
      id: opts.id ?? responseIdFor(undefined),
      createdAt: opts.createdAt,
      model: opts.model,
      echo: opts.echo ?? DEFAULT_ECHO,
    };
  }

  #ev(type: string, body: Record<string, unknown>): string {
    return encodeSseEvent(type, { type, sequence_number: this.#seq++, ...body });
  }

  #start(): string {
    if (this.#started) return "";
    this.#started = true;
    const response = buildResponse(this.#env, "in_progress", [], null);
    return this.#ev("response.created", { response }) +
      this.#ev("response.in_progress", { response });
  }

  /** Emit the closing events of the open item with its final content. */
  #close(status: ItemStatus = "completed"): string {
    const open = this.#open;
    if (open === null) return "";
    this.#open = null;
    const base = { item_id: open.id, output_index: open.outputIndex };
    const item = this.#output[open.outputIndex];
    if (item === undefined) throw new Error("output item missing");
    item.status = status;
    let out = "";
    if (item.type === "reasoning") {
      item.content = [{ type: "reasoning_text", text: open.text }];
      out += this.#ev("response.reasoning_text.done", {
        ...base,
        content_index: 0,
        text: open.text,
      });
      out += this.#ev("response.content_part.done", {
        ...base,
        content_index: 0,
        part: { type: "reasoning_text", text: open.text },
      });
    } else if (item.type === "message") {
      const part = {
        type: "output_text" as const,
        text: open.text,
        annotations: [] as [],
        logprobs: [] as [],
      };
      item.content = [part];
      out += this.#ev("response.output_text.done", {
        ...base,
        content_index: 0,
        text: open.text,
        logprobs: [],
      });
      out += this.#ev("response.content_part.done", { ...base, content_index: 0, part });
    } else {
      item.arguments = open.text;
      out += this.#ev("response.function_call_arguments.done", {
        ...base,
        name: item.name,
        arguments: open.text,
      });
    }
    out += this.#ev("response.output_item.done", {
      output_index: open.outputIndex,
      item: structuredClone(item),
    });
    return out;
  }

  #openText(kind: "reasoning" | "message"): string {
    if (this.#open?.kind === kind) return "";
    let out = this.#close();
    const outputIndex = this.#output.length;
    const id = itemIdFor(kind === "message" ? "msg" : "rs", this.#env.id, outputIndex);
    const item: ResponsesOutputItem = kind === "message"
      ? { type: "message", id, status: "in_progress", role: "assistant", content: [] }
      : { type: "reasoning", id, summary: [], content: [], status: "in_progress" };
    this.#output.push(item);
    this.#open = { kind, outputIndex, id, text: "" };
    out += this.#ev("response.output_item.added", {
      output_index: outputIndex,
      item: structuredClone(item),
    });
    const part = kind === "message"
      ? { type: "output_text", text: "", annotations: [], logprobs: [] }
      : { type: "reasoning_text", text: "" };
    out += this.#ev("response.content_part.added", {
      item_id: id,
      output_index: outputIndex,
      content_index: 0,
      part,
    });
    return out;
  }

  #textDelta(kind: "reasoning" | "message", delta: string): string {
    let out = this.#openText(kind);
    const open = this.#open;
    if (open === null) throw new Error("no open item");
    open.text += delta;
    this.#deltas++;
    const base = { item_id: open.id, output_index: open.outputIndex, content_index: 0, delta };
    out += kind === "message"
      ? this.#ev("response.output_text.delta", { ...base, logprobs: [] })
      : this.#ev("response.reasoning_text.delta", base);
    return out;
  }

  #openTool(toolIndex: number, st: ToolState): string {
    let out = this.#close();
    const outputIndex = this.#output.length;
    const id = itemIdFor("fc", this.#env.id, outputIndex);
    st.outputIndex = outputIndex;
    const item: ResponsesOutputItem = {
      type: "function_call",
      id,
      call_id: st.callId ?? id,
      name: st.name ?? "",
      arguments: "",
      status: "in_progress",
    };
    this.#output.push(item);
    this.#open = { kind: "function_call", outputIndex, id, text: "", tool: toolIndex };
    out += this.#ev("response.output_item.added", {
      output_index: outputIndex,
      item: structuredClone(item),
    });
    if (st.pendingArgs !== "") {
      out += this.#argsDelta(st.pendingArgs);
      st.pendingArgs = "";
    }
    return out;
  }

  #argsDelta(delta: string): string {
    const open = this.#open;
    if (open === null) throw new Error("no open item");
    open.text += delta;
    this.#deltas++;
    return this.#ev("response.function_call_arguments.delta", {
      item_id: open.id,
      output_index: open.outputIndex,
      delta,
    });
  }

  #choice(choice: ChatChunkChoice): string {
    let out = "";
    const d = choice.delta;
    if (typeof d.reasoning_content === "string" && d.reasoning_content !== "") {
      out += this.#textDelta("reasoning", d.reasoning_content);
    }
    if (typeof d.content === "string" && d.content !== "") {
      out += this.#textDelta("message", d.content);
    }
    for (const tc of d.tool_calls ?? []) {
      let st = this.#tools.get(tc.index);
      if (st === undefined) {
        st = { pendingArgs: "" };
        this.#tools.set(tc.index, st);
      }
      if (tc.id !== undefined && tc.id !== "" && st.callId === undefined) st.callId = tc.id;
      const name = tc.function?.name;
      if (st.outputIndex === undefined && typeof name === "string" && name !== "") st.name = name;
      const args = tc.function?.arguments ?? "";
      if (st.outputIndex === undefined) {
        st.pendingArgs += args;
        if (st.name !== undefined) out += this.#openTool(tc.index, st);
        continue;
      }
      if (args === "") continue;
      if (this.#open?.kind !== "function_call" || this.#open.tool !== tc.index) {
        throw new GatewayError("upstream_error", "upstream interleaved tool call arguments");
      }
      out += this.#argsDelta(args);
    }
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.#finish = choice.finish_reason;
    }
    return out;
  }

  chunk(c: ChatChunk): string {
    if (this.#done) return "";
    this.#sawChunk = true;
    let out = this.#start();
    if (c.usage) this.#usage = c.usage;
    for (const choice of c.choices) {
      if (choice.index === 0) out += this.#choice(choice);
    }
    return out;
  }

  #final(
    status: ResponsesResponse["status"],
    extra: Parameters<typeof buildResponse>[4],
  ): ResponsesResponse {
    const u = this.usage();
    const usage = u === undefined ? null : toResponsesUsage({
      ...this.#usage,
      prompt_tokens: u.prompt_tokens,
      completion_tokens: u.completion_tokens,
    });
    if (usage && u && this.#cost) Object.assign(usage, { cost: this.#cost(u) });
    return buildResponse(this.#env, status, structuredClone(this.#output), usage, extra);
  }

  end(): string {
    if (this.#done) return "";
    this.#done = true;
    let out = this.#start();
    for (const [toolIndex, st] of this.#tools) {
      if (st.outputIndex === undefined) out += this.#openTool(toolIndex, st);
    }
    const { status, incomplete } = statusFor(this.#finish);
    out += this.#close(status === "incomplete" ? "incomplete" : "completed");
    const response = this.#final(status, incomplete ? { incomplete } : {});
    out += this.#ev(status === "incomplete" ? "response.incomplete" : "response.completed", {
      response,
    });
    return out;
  }

  fail(err: GatewayError): string {
    if (this.#done) return "";
    this.#done = true;
    let out = this.#start();
    // The open item is left unfinished (no done events): it was cut, not completed.
    const open = this.#open;
    if (open !== null) {
      const item = this.#output[open.outputIndex];
      if (item?.type === "message") {
        item.content = [{ type: "output_text", text: open.text, annotations: [], logprobs: [] }];
      } else if (item?.type === "reasoning") {
        item.content = [{ type: "reasoning_text", text: open.text }];
      } else if (item?.type === "function_call") item.arguments = open.text;
      if (item) item.status = "incomplete";
      this.#open = null;
    }
    const code = err.kind === "rate_limited" ? "rate_limit_exceeded" : "server_error";
    const response = this.#final("failed", { error: { code, message: err.message } });
    out += this.#ev("response.failed", { response });
    return out;
  }

  keepAlive(): string {
    if (this.#done) return "";
    if (!this.#started) return this.#start();
    return "\n";
  }

  usage(): { prompt_tokens: number; completion_tokens: number } | undefined {
    if (this.#usage) {
      return {
        prompt_tokens: this.#usage.prompt_tokens,
        completion_tokens: this.#usage.completion_tokens,
      };
    }
    if (!this.#sawChunk) return undefined;
    return { prompt_tokens: this.#estimate ?? 0, completion_tokens: this.#deltas };
  }
}

/** A fresh translator for one streamed `/v1/responses` request. */
export function createResponsesStreamTranslator(opts: ResponsesStreamOptions): StreamTranslator {
  return new ResponsesStreamTranslator(opts);
}
