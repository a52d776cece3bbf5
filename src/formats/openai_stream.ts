/**
 * The OpenAI streaming pass-through shared by `/v1/chat/completions` and
 * `/v1/completions`: each upstream chunk re-emitted with the client's model
 * id; the usage-only chunk the gateway asked for (for billing) dropped unless
 * the client asked for it too; `data: [DONE]` always written at the end; an
 * upstream failure mid-stream becomes an in-band `data: {"error": …}` frame.
 * With `obfuscate` (the client's `stream_options.include_obfuscation: true`)
 * each chunk gets OpenAI's `obfuscation` member, padding its frame to a
 * multiple of `OBFUSCATION_BUCKET` bytes so frame sizes do not reveal token
 * lengths (deterministic filler: the length is what leaks, not the bytes).
 * Pure.
 */
import { errorBody, type GatewayError } from "../http/mod.ts";
import type { ChatUsage } from "./chat/types.ts";
import type { TokenUsage, Translator } from "./stream_translator.ts";

interface OpenAiChunk {
  choices?: unknown[];
  usage?: (ChatUsage & { cost?: number }) | null;
  model?: string;
  [k: string]: unknown;
}

export function usageOf(u: ChatUsage | null | undefined): TokenUsage | undefined {
  if (!u || typeof u.prompt_tokens !== "number" || typeof u.completion_tokens !== "number") {
    return undefined;
  }
  return { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens };
}

/** Frame sizes of an obfuscated stream are multiples of this. */
export const OBFUSCATION_BUCKET = 64;

function frame(chunk: OpenAiChunk, obfuscate: boolean): string {
  if (!obfuscate) return `data: ${JSON.stringify(chunk)}\n\n`;
  const bare = `data: ${JSON.stringify({ ...chunk, obfuscation: "" })}\n\n`;
  const bytes = new TextEncoder().encode(bare).byteLength;
  const pad = (OBFUSCATION_BUCKET - (bytes % OBFUSCATION_BUCKET)) % OBFUSCATION_BUCKET;
  return `data: ${JSON.stringify({ ...chunk, obfuscation: "x".repeat(pad) })}\n\n`;
}

export function createOpenAiStreamPassthrough(
  opts: {
    model: string;
    clientWantsUsage: boolean;
    obfuscate?: boolean;
    /** `usage.cost` in credits for a usage the client receives (OpenRouter's field). */
    cost?: (u: TokenUsage) => number;
  },
): Translator {
  let usage: TokenUsage | undefined;
  let ended = false;
  return {
    chunk(data: never): string {
      const c = data as OpenAiChunk;
      const u = usageOf(c.usage);
      if (u) usage = u;
      const usageOnly = Array.isArray(c.choices) && c.choices.length === 0;
      if (usageOnly && !opts.clientWantsUsage) return "";
      const out: OpenAiChunk = { ...c, model: opts.model };
      if (!opts.clientWantsUsage && out.usage !== undefined) delete out.usage;
      else if (u && opts.cost && out.usage) out.usage = { ...out.usage, cost: opts.cost(u) };
      // A chunk's system_fingerprint is a string or absent (OpenAI's and OpenRouter's chunk types).
      if (out.system_fingerprint === null) delete out.system_fingerprint;
      return frame(out, opts.obfuscate === true);
    },
    end(): string {
      if (ended) return "";
      ended = true;
      return "data: [DONE]\n\n";
    },
    fail: (err: GatewayError) => `data: ${JSON.stringify(errorBody(err, "openai"))}\n\n`,
    usage: () => usage,
  };
}
