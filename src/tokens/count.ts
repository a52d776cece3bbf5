/**
 * The gateway's one token counter: every token figure it computes (context
 * checks, embedding input limits, credit and tokens-per-minute reservations,
 * `count_tokens`) comes from here. Real BPE tokenizers from the npm package
 * `gpt-tokenizer`, whose encodings ship inside the package (nothing is
 * downloaded at run time). Which encoding a model uses is its catalog entry's
 * `tokenizer`; a model without one uses {@link FALLBACK_TOKENIZER}.
 *
 * Counting is linear in the text with a small constant, whatever the text
 * (docs/decisions/token-counting.md): the library's BPE is
 * quadratic in one pre-token (a run of one letter, CJK without spaces, a run
 * of spaces), so no piece longer than {@link PIECE_MAX} reaches it; a limit
 * is decided by cheap bounds first (./bounds.ts) and counting stops past it;
 * and the BPE merging of pieces not already known is bounded per count
 * ({@link NOVEL_BUDGET}), past which such pieces count as their UTF-8 bytes.
 * Each of these can only count high, never low, by design.
 */
import { GptEncoding } from "gpt-tokenizer/GptEncoding";
import o200kRanks from "gpt-tokenizer/bpeRanks/o200k_base";
import cl100kRanks from "gpt-tokenizer/bpeRanks/cl100k_base";
import {
  CL100K_TOKEN_SPLIT_REGEX,
  O200K_TOKEN_SPLIT_REGEX,
} from "gpt-tokenizer/encodingParams/constants";

import { Buffer } from "node:buffer";
import type { TokenizerName } from "./names.ts";
import { floorExceeds, utf8Length } from "./bounds.ts";
import { REUSE_MIN_CHARS, type ScopedCounts } from "./text_counts.ts";

export { FALLBACK_TOKENIZER, type TokenizerName, TOKENIZERS } from "./names.ts";

/** Tokens an image part is reserved at (OpenAI's 512×512 tile price, a conservative middle). */
export const IMAGE_TOKENS = 765;
/** Chat framing: per message (role and separators), and the reply's priming (OpenAI's rule). */
export const TOKENS_PER_MESSAGE = 3;
export const REPLY_PRIMING_TOKENS = 3;

/**
 * The longest piece (UTF-16 units) the BPE is given: a longer pre-token is
 * counted in pieces of this length. Exact for every pre-token of ordinary
 * text; for a longer one (a run of one character, CJK without spaces) each
 * cut can add a token (rarely on CJK, never on runs).
 */
export const PIECE_MAX = 128;

/**
 * UTF-16 units of pieces one count may merge with the BPE (pieces neither in
 * the vocabulary nor counted before): the BPE costs microseconds per byte,
 * so this bounds a count's CPU. Past it such a piece counts as its UTF-8
 * bytes (an upper bound); ordinary prose and code rarely get there.
 */
export const NOVEL_BUDGET = 16 * 1024;

/** Pieces remembered with their counts, per encoding (cleared when full). */
const MEMO_MAX = 65_536;

/** Special-token text (`<|endoftext|>`…) in a prompt is ordinary text, never a special token. */
const PLAIN = { disallowedSpecial: new Set<string>() };

interface Encoding {
  countTokens(text: string, options: typeof PLAIN): number;
}

interface Built {
  enc: Encoding;
  split: RegExp;
  /** Strings that are one token (the vocabulary); null if the library's layout changed. */
  vocab: ReadonlyMap<string, number> | null;
  memo: Map<string, number>;
}

const RANKS: Record<TokenizerName, () => typeof o200kRanks> = {
  o200k_base: () => o200kRanks,
  cl100k_base: () => cl100kRanks,
};
const SPLIT: Record<TokenizerName, RegExp> = {
  o200k_base: O200K_TOKEN_SPLIT_REGEX,
  cl100k_base: CL100K_TOKEN_SPLIT_REGEX,
};
const built = new Map<TokenizerName, Built>();

/**
 * An encoding, built on first use: building one's tables costs tens of MB of heap, so a
 * catalog that names only one encoding (the development one) never pays for the other.
 */
function encoding(name: TokenizerName): Built {
  let b = built.get(name);
  if (b === undefined) {
    const enc = GptEncoding.getEncodingApi(name, RANKS[name]);
    // The library's own string → rank map (gpt-tokenizer 4.0.0), read to tell a
    // vocabulary hit (cheap) from a piece the BPE must merge (charged to the budget).
    const core = (enc as unknown as { bytePairEncodingCoreProcessor?: unknown })
      .bytePairEncodingCoreProcessor as { bytePairStringRankEncoder?: unknown } | undefined;
    const vocab = core?.bytePairStringRankEncoder instanceof Map
      ? core.bytePairStringRankEncoder as Map<string, number>
      : null;
    b = { enc, split: new RegExp(SPLIT[name].source, "gu"), vocab, memo: new Map() };
    built.set(name, b);
  }
  return b;
}

/** Builds the named encodings now (at start-up), so no request waits for one's tables. */
export function prepareTokenizers(names: Iterable<TokenizerName>): void {
  for (const n of names) encoding(n);
}

/** Whether the vocabulary of `tokenizer` could be read (tests check the library's layout). */
export function vocabularyReadable(tokenizer: TokenizerName): boolean {
  return encoding(tokenizer).vocab !== null;
}

/** What one count did, for tests and callers that want to see the work bounded. */
export interface CountWork {
  /** The longest piece handed to the BPE (UTF-16 units). */
  longestPiece: number;
  /** UTF-16 units of pieces merged by the BPE. */
  merged: number;
  /** Pieces counted as their bytes once the budget was spent. */
  overBudget: number;
  /** UTF-16 units of texts whose count was reused (./text_counts.ts), not tokenized. */
  reused: number;
}

/** What is left of one request's {@link NOVEL_BUDGET}. */
export interface BpeBudget {
  left: number;
}

export function newBpeBudget(): BpeBudget {
  return { left: NOVEL_BUDGET };
}

/**
 * One count: a running total, its limit, and its BPE budget, shared by every
 * text of one request (so a request of many messages has one budget).
 */
export class TokenCounter {
  total = 0;
  readonly work: CountWork = { longestPiece: 0, merged: 0, overBudget: 0, reused: 0 };
  readonly #budget: BpeBudget;
  readonly #b: Built;
  readonly #reuse: ScopedCounts | undefined;

  /**
   * `budget`: shared by the counters of one request that counts several texts apart.
   * `reuse`: the requesting key's earlier counts of long texts (./text_counts.ts).
   */
  constructor(
    readonly tokenizer: TokenizerName,
    readonly limit?: number,
    budget: BpeBudget = newBpeBudget(),
    reuse?: ScopedCounts,
  ) {
    this.#b = encoding(tokenizer);
    this.#budget = budget;
    this.#reuse = reuse;
  }

  /** Past the limit: the total is then `limit + 1` and further texts are not read. */
  get over(): boolean {
    return this.limit !== undefined && this.total > this.limit;
  }

  /** Adds `n` tokens counted elsewhere (framing, images). */
  add(n: number): void {
    if (this.over) return;
    this.total += n;
    this.#clamp();
  }

  /** Adds the tokens of `text`. */
  text(text: string): void {
    if (text.length === 0 || this.over) return;
    const reuse = this.#reuse;
    if (reuse === undefined || text.length < REUSE_MIN_CHARS) return this.#count(text);
    const name = reuse.name(this.tokenizer, text);
    const known = reuse.get(name);
    const totals = reuse.counts.totals;
    if (known !== undefined) {
      totals.reused += text.length;
      this.work.reused += text.length;
      this.total += known;
      return this.#clamp();
    }
    const before = this.total;
    const overBudget = this.work.overBudget;
    this.#count(text);
    totals.tokenized += text.length;
    // Only a whole, exact count is kept: one cut short by the limit or counted
    // partly as bytes (the budget spent) would be a different figure next time.
    if (!this.over && this.work.overBudget === overBudget) reuse.set(name, this.total - before);
  }

  #count(text: string): void {
    if (this.limit !== undefined) {
      const left = this.limit - this.total;
      // 3 bytes per UTF-16 unit at most: the ceiling cannot pass `left` unless this does.
      if (text.length * 3 > left && floorExceeds(text, this.tokenizer, left)) {
        this.total = this.limit + 1;
        return;
      }
    }
    for (const m of text.matchAll(this.#b.split)) {
      const s = m[0];
      if (s.length <= PIECE_MAX) this.total += this.#piece(s);
      else {
        for (let i = 0; i < s.length && !this.over;) {
          let j = Math.min(s.length, i + PIECE_MAX);
          // Never cut a surrogate pair.
          const c = s.charCodeAt(j - 1);
          if (j < s.length && c >= 0xd800 && c <= 0xdbff) j--;
          this.total += this.#piece(s.slice(i, j));
          i = j;
        }
      }
      if (this.over) break;
    }
    this.#clamp();
  }

  #clamp(): void {
    if (this.limit !== undefined && this.total > this.limit) this.total = this.limit + 1;
  }

  #piece(s: string): number {
    const b = this.#b;
    const known = b.memo.get(s);
    if (known !== undefined) return known;
    if (b.vocab?.has(s)) return 1;
    if (this.#budget.left <= 0) {
      this.work.overBudget++;
      return utf8Length(s);
    }
    this.#budget.left -= s.length;
    this.work.merged += s.length;
    if (s.length > this.work.longestPiece) this.work.longestPiece = s.length;
    const n = b.enc.countTokens(s, PLAIN);
    if (b.memo.size >= MEMO_MAX) b.memo.clear();
    b.memo.set(s, n);
    return n;
  }
}

/**
 * Tokens of `text`, linear in its length with a small constant on any input
 * (the bounded counter other modules call, e.g. to bill delivered content).
 * With `limit`, counting stops once past it and returns `limit + 1`: a prompt
 * that cannot fit costs no more CPU than the limit. The figure is exact for
 * ordinary text and never lower than the exact count by design (see above).
 */
export function countText(
  text: string,
  tokenizer: TokenizerName,
  limit?: number,
  budget?: BpeBudget,
): number {
  if (text.length === 0) return 0;
  const c = new TokenCounter(tokenizer, limit, budget);
  c.text(text);
  return c.total;
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
 * reply priming, into `counter` (one budget and limit for the request).
 */
export function countChatInto(
  counter: TokenCounter,
  messages: readonly CountableMessage[],
): void {
  counter.add(REPLY_PRIMING_TOKENS);
  for (const m of messages) {
    if (counter.over) return;
    counter.add(TOKENS_PER_MESSAGE);
    if (m.name) {
      counter.add(1);
      counter.text(m.name);
    }
    const c = m.content;
    if (typeof c === "string") counter.text(c);
    else if (Array.isArray(c)) {
      for (const p of c as readonly CountablePart[]) {
        if (p.type === "text" && typeof p.text === "string") counter.text(p.text);
        else counter.add(IMAGE_TOKENS);
      }
    }
    for (const t of m.tool_calls ?? []) {
      counter.text(t.function.name);
      counter.text(t.function.arguments);
    }
  }
}

/**
 * A ceiling on {@link countChatInto}'s figure without tokenizing: every text at
 * its UTF-8 bytes (a byte-level BPE token is at least one byte; a lone
 * surrogate is encoded as U+FFFD's 3 bytes, as the tokenizer encodes it),
 * framing and images as counted there. Never below the count. The bytes are
 * measured natively (`Buffer.byteLength`, no copy): a JS loop over every
 * character was a large share of a long prompt's CPU once nothing else read
 * it character by character. `measure`: a text's bound (its UTF-8 bytes by
 * default; a caller may give a text's exact count where it knows it), told
 * where a message's text sits (message index, and part index in a list of
 * parts), so that it can find what it knows of the text without reading it.
 */
export function chatTokenCeiling(
  messages: readonly CountableMessage[],
  measure: TextMeasure = byteLength,
): number {
  let n = REPLY_PRIMING_TOKENS;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    n += TOKENS_PER_MESSAGE;
    if (m.name) n += 1 + measure(m.name);
    const c = m.content;
    if (typeof c === "string") n += measure(c, i);
    else if (Array.isArray(c)) {
      const parts = c as readonly CountablePart[];
      for (let j = 0; j < parts.length; j++) {
        const p = parts[j];
        n += p.type === "text" && typeof p.text === "string" ? measure(p.text, i, j) : IMAGE_TOKENS;
      }
    }
    for (const t of m.tool_calls ?? []) {
      n += measure(t.function.name) + measure(t.function.arguments);
    }
  }
  return n;
}

/** A text's bound in tokens; `message` and `part` say where a message's content text sits. */
export type TextMeasure = (text: string, message?: number, part?: number) => number;

/** A text's UTF-8 bytes, measured natively (no copy): the ceiling on its tokens. */
export function byteLength(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/** {@link countChatInto} on a fresh counter; stops early past `limit` (returning `limit + 1`). */
export function countChat(
  messages: readonly CountableMessage[],
  tokenizer: TokenizerName,
  limit?: number,
): number {
  const c = new TokenCounter(tokenizer, limit);
  countChatInto(c, messages);
  return c.total;
}
