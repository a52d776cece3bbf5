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
  /** Per key, its entries; both maps least recently used first. */
  readonly #keys = new Map<string, Map<string, number>>();
  #size = 0;
  readonly #max: number;
  readonly #perKey: number;
  /** Running totals for the metrics (read at scrape time). */
  readonly totals: CountingTotals = { tokenized: 0, reused: 0 };

  /**
   * `perKeyMax`: the most entries one key holds (a quarter of the whole by default),
   * so a key sending many long texts cannot push every other key's counts out.
   */
  constructor(
    secret: Uint8Array,
    maxEntries = REUSE_MAX_ENTRIES,
    perKeyMax = Math.ceil(maxEntries / 4),
  ) {
    if (secret.length < 32) throw new Error("prompt counts secret: at least 32 bytes");
    this.#secret = secret;
    this.#max = maxEntries;
    this.#perKey = perKeyMax;
  }

  /** The counts one key's requests may reuse: its own. */
  scope(keyDigest: string): ScopedCounts {
    return new ScopedCounts(this, keyDigest);
  }

  /** Entries held (tests). */
  get size(): number {
    return this.#size;
  }

  /** Whether the key has any count kept (if not, nothing of its request needs naming). */
  holds(scope: string): boolean {
    return this.#keys.has(scope);
  }

  /** @internal The entry's name: HMAC of the scope, tokenizer and text. */
  name(scope: string, tokenizer: TokenizerName, text: string): string {
    return createHmac("sha256", this.#secret)
      .update(`${LABEL}${scope}\0${tokenizer}\0`)
      .update(text)
      .digest("base64");
  }

  /** @internal */
  get(scope: string, name: string): number | undefined {
    const own = this.#keys.get(scope);
    const n = own?.get(name);
    if (own !== undefined && n !== undefined) {
      // Most recently used last, of the key's entries and of the keys.
      own.delete(name);
      own.set(name, n);
      this.#keys.delete(scope);
      this.#keys.set(scope, own);
    }
    return n;
  }

  /** @internal */
  set(scope: string, name: string, tokens: number): void {
    let own = this.#keys.get(scope);
    if (own === undefined) own = new Map();
    else this.#keys.delete(scope);
    this.#keys.set(scope, own);
    if (own.size >= this.#perKey) this.#dropOldest(scope, own);
    else if (this.#size >= this.#max) {
      // The least recently used key gives up its oldest entry.
      const [lru, entries] = this.#keys.entries().next().value!;
      this.#dropOldest(lru, entries);
    }
    own.set(name, tokens);
    this.#size++;
  }

  #dropOldest(scope: string, entries: Map<string, number>): void {
    const oldest = entries.keys().next();
    if (oldest.done) return;
    entries.delete(oldest.value);
    this.#size--;
    if (entries.size === 0) this.#keys.delete(scope);
  }
}

/**
 * One key's view of {@link TextCounts} for one request, handed to a
 * {@link TokenCounter}: it names each text once however often the request
 * looks it up (the ceiling, then perhaps the count).
 */
export class ScopedCounts {
  /**
   * Names made for this request's texts, by text (V8 hashes a string once), for one
   * tokenizer; made on the first name (most requests never name a text).
   */
  #names: Map<string, string> | undefined;
  #tokenizer: TokenizerName | undefined;

  constructor(readonly counts: TextCounts, readonly scope: string) {}

  /** The entry's name for `text`. */
  name(tokenizer: TokenizerName, text: string): string {
    this.#tokenizer ??= tokenizer;
    if (tokenizer !== this.#tokenizer) return this.counts.name(this.scope, tokenizer, text);
    const names = this.#names ??= new Map();
    let name = names.get(text);
    if (name === undefined) {
      name = this.counts.name(this.scope, tokenizer, text);
      names.set(text, name);
    }
    return name;
  }

  /** Whether this key has any count kept. */
  get any(): boolean {
    return this.counts.holds(this.scope);
  }

  /** The count of a long text this key had counted before, if kept; nothing is tokenized. */
  peek(tokenizer: TokenizerName, text: string): number | undefined {
    return text.length < REUSE_MIN_CHARS ? undefined : this.get(this.name(tokenizer, text));
  }

  get(name: string): number | undefined {
    return this.counts.get(this.scope, name);
  }

  set(name: string, tokens: number): void {
    this.counts.set(this.scope, name, tokens);
  }
}
