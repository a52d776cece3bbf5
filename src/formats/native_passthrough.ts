/**
 * For upstreams that natively serve the client's format (Anthropic messages,
 * OpenAI responses): events are forwarded as they come, only the model name
 * rewritten to the id the client asked for, usage read for billing, and an
 * in-band error event of the same format when the upstream fails. Pure.
 */
import { errorBody, type GatewayError } from "../http/mod.ts";
import type { TokenUsage, Translator } from "./stream_translator.ts";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export function nativeMessagesPassthrough(model: string): Translator {
  let input: number | undefined;
  let output: number | undefined;
  return {
    chunk(data: never, event?: string) {
      const d = data as unknown;
      if (!isObj(d)) return "";
      let out: Obj = d;
      if (d.type === "message_start" && isObj(d.message)) {
        out = { ...d, message: { ...d.message, model } };
        const u = d.message.usage;
        if (isObj(u)) input = num(u.input_tokens) ?? input;
      }
      if (d.type === "message_delta" && isObj(d.usage)) {
        output = num(d.usage.output_tokens) ?? output;
        input = num(d.usage.input_tokens) ?? input;
      }
      return `event: ${eventName(event, d.type)}\ndata: ${JSON.stringify(out)}\n\n`;
    },
    end: () => "",
    fail(err: GatewayError) {
      return `event: error\ndata: ${JSON.stringify(errorBody(err, "anthropic"))}\n\n`;
    },
    usage(): TokenUsage | undefined {
      return input === undefined
        ? undefined
        : { prompt_tokens: input, completion_tokens: output ?? 0 };
    },
  };
}

export function nativeResponsesPassthrough(model: string): Translator {
  let usage: TokenUsage | undefined;
  let seq = -1;
  return {
    chunk(data: never, event?: string) {
      const d = data as unknown;
      if (!isObj(d)) return "";
      const n = num(d.sequence_number);
      if (n !== undefined) seq = Math.max(seq, n);
      let out: Obj = d;
      if (isObj(d.response)) {
        out = { ...d, response: { ...d.response, model } };
        const u = d.response.usage;
        if (isObj(u) && num(u.input_tokens) !== undefined) {
          usage = {
            prompt_tokens: num(u.input_tokens)!,
            completion_tokens: num(u.output_tokens) ?? 0,
          };
        }
      }
      return `event: ${eventName(event, d.type)}\ndata: ${JSON.stringify(out)}\n\n`;
    },
    end: () => "",
    fail(err: GatewayError) {
      seq++;
      const failed = {
        type: "response.failed",
        sequence_number: seq,
        response: {
          object: "response",
          status: "failed",
          model,
          error: { code: "server_error", message: err.message },
        },
      };
      return `event: response.failed\ndata: ${JSON.stringify(failed)}\n\n`;
    },
    usage: () => usage,
  };
}

/** Non-streamed native bodies: only the model name rewritten. */
export function withModel(body: unknown, model: string): unknown {
  return isObj(body) ? { ...body, model } : body;
}

/**
 * The client's own body for an upstream that speaks its format: the model the
 * candidate serves it under, the gateway's `provider` block dropped, and
 * `defaults` for what the client left out.
 */
export function nativeBody(
  body: unknown,
  upstreamModel: string,
  defaults?: Record<string, unknown>,
): Record<string, unknown> {
  return {
    ...defaults,
    ...(body as Record<string, unknown>),
    model: upstreamModel,
    provider: undefined,
  };
}

/**
 * The event line's name: the upstream's `event:` (one SSE line: the decoder split at line
 * ends), else the data's `type` when it is a plain name. A `type` holding a line break
 * would start a frame of the upstream's making; one that is not a string names nothing.
 */
function eventName(event: string | undefined, type: unknown): string {
  if (event !== undefined) return event;
  return typeof type === "string" && /^[\x21-\x7e]{1,64}$/.test(type) ? type : "message";
}
