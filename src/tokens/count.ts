/**
 * The gateway's one token counter: every token figure it computes (context
 * checks, embedding input limits, credit and tokens-per-minute reservations,
 * `count_tokens`) comes from here. Real BPE tokenizers from the npm package
 * `gpt-tokenizer`, whose encodings ship inside the package (nothing is
 * downloaded at run time). Which encoding a model uses is its catalog entry's
 * `tokenizer`; a model without one uses {@link FALLBACK_TOKENIZER}.
 */
import { GptEncoding } from "gpt-tokenizer/GptEncoding";
import o200kRanks from "gpt-tokenizer/bpeRanks/o200k_base";
import cl100kRanks from "gpt-tokenizer/bpeRanks/cl100k_base";

import type { TokenizerName } from "./names.ts";

export { FALLBACK_TOKENIZER, type TokenizerName, TOKENIZERS } from "./names.ts";

/** Tokens an image part is reserved at (OpenAI's 512×512 tile price, a conservative middle). */
export const IMAGE_TOKENS = 765;
/** Chat framing: per message (role and separators), and the reply's priming (OpenAI's rule). */
export const TOKENS_PER_MESSAGE = 3;
export const REPLY_PRIMING_TOKENS = 3;

interface Encoding {
  countTokens(text: string): number;
  isWithinTokenLimit(text: string, limit: number): false | number;
}

const RANKS: Record<TokenizerName, () => typeof o200kRanks> = {
  o200k_base: () => o200kRanks,
  cl100k_base: () => cl100kRanks,
};
const built = new Map<TokenizerName, Encoding>();

/**
 * An encoding, built on first use: building one's tables costs tens of MB of heap, so a
 * catalog that names only one encoding (the development one) never pays for the other.
 */
function encoding(name: TokenizerName): Encoding {
  let enc = built.get(name);
  if (enc === undefined) {
    enc = GptEncoding.getEncodingApi(name, RANKS[name]);
    built.set(name, enc);
  }
  return enc;
}

/** Builds the named encodings now (at start-up), so no request waits for one's tables. */
export function prepareTokenizers(names: Iterable<TokenizerName>): void {
  for (const n of names) encoding(n);
}

/**
 * Tokens of `text`. With `limit`, counting stops once past it and returns
 * `limit + 1`: a prompt that cannot fit costs no more CPU than the limit.
 */
export function countText(text: string, tokenizer: TokenizerName, limit?: number): number {
  if (text.length === 0) return 0;
  const enc = encoding(tokenizer);
  if (limit === undefined) return enc.countTokens(text);
  const n = enc.isWithinTokenLimit(text, limit);
  return n === false ? limit + 1 : n;
}

/** The shape of a chat message as counted (structural, so any format's messages fit). */
export interface CountableMessage {
  role: string;
  content?: string | null | readonly CountablePart[];
  name?: string;
  tool_calls?: readonly { function: { name: string; arguments: string } }[];
}

export interface CountablePart {
  type: string;
  text?: string;
}

/**
 * Prompt tokens of a chat conversation: each message's text, its framing, an
 * image at {@link IMAGE_TOKENS}, tool calls' names and arguments, and the
 * reply priming. Stops early past `limit` (returning `limit + 1`).
 */
export function countChat(
  messages: readonly CountableMessage[],
  tokenizer: TokenizerName,
  limit?: number,
): number {
  let total = REPLY_PRIMING_TOKENS;
  const left = () => (limit === undefined ? undefined : Math.max(0, limit - total));
  for (const m of messages) {
    total += TOKENS_PER_MESSAGE;
    if (m.name) total += 1 + countText(m.name, tokenizer, left());
    const c = m.content;
    if (typeof c === "string") total += countText(c, tokenizer, left());
    else if (Array.isArray(c)) {
      for (const p of c as readonly CountablePart[]) {
        total += p.type === "text" && typeof p.text === "string"
          ? countText(p.text, tokenizer, left())
          : IMAGE_TOKENS;
      }
    }
    for (const t of m.tool_calls ?? []) {
      total += countText(t.function.name, tokenizer, left()) +
        countText(t.function.arguments, tokenizer, left());
    }
    if (limit !== undefined && total > limit) return limit + 1;
  }
  return total;
}
