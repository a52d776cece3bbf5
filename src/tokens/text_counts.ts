/**
 * Token counts of long texts a key sent before, so a coding agent's next turn
 * counts only what is new (docs/decisions/prompt-counts-reused.md). An agent
 * resends its whole conversation every turn: ~100k tokens, of which one tool
 * answer is new; counting it all again costs tens of ms of the main thread.
 *
 * Held by an HMAC of (key digest, tokenizer, text) under a per-process secret:
 * never the text, and no entry one key's request can hit with another key's
 * (a hit is faster, so a shared entry would let one tenant time whether
 * another sent a text, as a shared prefix cache would). In memory only,
 * bounded in entries, least recently used dropped first.
 */
import { createHmac } from "node:crypto";
import type { TokenizerName } from "./names.ts";

/** Texts shorter than this (UTF-16 units) are counted again: their count costs less than the HMAC. */
export const REUSE_MIN_CHARS = 2048;
/** Entries kept (~100 bytes each): a conversation of 100k tokens is ~50 of them. */
export const REUSE_MAX_ENTRIES = 16_384;

/** The domain of these HMACs (no other use of the secret can produce one). */
const LABEL = "aci.prompt_counts.v1\0";

/** UTF-16 units of text counted by the tokenizer, and reused from earlier counts. */
export interface CountingTotals {
  tokenized: number;
  reused: number;
}

export class TextCounts {
  readonly #secret: Uint8Array;
  readonly #counts = new Map<string, number>();
  readonly #max: number;
  /** Running totals for the metrics (read at scrape time). */
  readonly totals: CountingTotals = { tokenized: 0, reused: 0 };

  constructor(secret: Uint8Array, maxEntries = REUSE_MAX_ENTRIES) {
    if (secret.length < 32) throw new Error("prompt counts secret: at least 32 bytes");
    this.#secret = secret;
    this.#max = maxEntries;
  }

  /** The counts one key's requests may reuse: its own. */
  scope(keyDigest: string): ScopedCounts {
    return new ScopedCounts(this, keyDigest);
  }

  /** Entries held (tests). */
  get size(): number {
    return this.#counts.size;
  }

  /** @internal The entry's name: HMAC of the scope, tokenizer and text. */
  name(scope: string, tokenizer: TokenizerName, text: string): string {
    return createHmac("sha256", this.#secret)
      .update(`${LABEL}${scope}\0${tokenizer}\0`)
      .update(text)
      .digest("base64");
  }

  /** @internal */
  get(name: string): number | undefined {
    const n = this.#counts.get(name);
    if (n !== undefined) {
      // Most recently used last: the oldest are dropped first.
      this.#counts.delete(name);
      this.#counts.set(name, n);
    }
    return n;
  }

  /** @internal */
  set(name: string, tokens: number): void {
    if (this.#counts.size >= this.#max) {
      const oldest = this.#counts.keys().next();
      if (!oldest.done) this.#counts.delete(oldest.value);
    }
    this.#counts.set(name, tokens);
  }
}

/** One key's view of {@link TextCounts}, handed to a {@link TokenCounter}. */
export class ScopedCounts {
  constructor(readonly counts: TextCounts, readonly scope: string) {}
}
