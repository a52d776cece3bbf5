/**
 * Cheap bounds on the tokens of a text, from one linear scan of its UTF-16
 * code units and no tokenizer at all (docs/decisions/token-counting.md).
 *
 * - Ceiling: the text's UTF-8 byte length. A byte-level BPE token is at
 *   least one byte, so no text has more tokens than bytes.
 * - Floor: the bytes of each character class divided by the most bytes of
 *   that class any one token of the vocabulary holds ({@link CLASS_MAX}),
 *   maximised over the classes. Every token holds at most that many bytes of
 *   a class, so the text needs at least that many tokens.
 *
 * Together they decide most limit checks without counting: a prompt whose
 * ceiling fits the context fits; one whose floor does not fit does not.
 */
import type { TokenizerName } from "./names.ts";

/** Classes of characters, by code point (the floor's partition of a text's bytes). */
export const CLASSES = [
  "ascii_letter",
  "ascii_digit",
  "ascii_space",
  "ascii_other",
  "han",
  "kana",
  "hangul",
  "other",
] as const;

/**
 * Per tokenizer, the most bytes of each class (in {@link CLASSES} order) that
 * one token of the vocabulary holds; a token of partial UTF-8 characters
 * counts its non-ASCII bytes in every non-ASCII class. Recomputed from the
 * vocabularies by ./bounds_test.ts, which fails if these drift.
 */
export const CLASS_MAX: Record<TokenizerName, readonly number[]> = {
  o200k_base: [26, 3, 128, 112, 30, 33, 21, 60],
  cl100k_base: [41, 3, 128, 114, 18, 21, 10, 48],
};

/** The class of a code point, an index into {@link CLASSES}. */
export function classOf(cp: number): number {
  if (cp < 0x80) return ASCII_CLASS[cp];
  if ((cp >= 0x3400 && cp <= 0x9fff) || (cp >= 0xf900 && cp <= 0xfaff)) return 4;
  if (cp >= 0x3040 && cp <= 0x30ff) return 5;
  if (cp >= 0xac00 && cp <= 0xd7a3) return 6;
  return 7;
}

const ASCII_CLASS = (() => {
  const t = new Uint8Array(128);
  for (let c = 0; c < 128; c++) {
    const l = c | 32;
    t[c] = l >= 97 && l <= 122
      ? 0
      : c >= 48 && c <= 57
      ? 1
      : c === 32 || (c >= 9 && c <= 13)
      ? 2
      : 3;
  }
  return t;
})();

export interface TokenBounds {
  /** No fewer tokens than this. */
  floor: number;
  /** No more tokens than this (the UTF-8 byte length). */
  ceiling: number;
}

/** Floor and ceiling of `text`'s tokens under `tokenizer`, in one pass (a few ns per character). */
export function tokenBounds(text: string, tokenizer: TokenizerName): TokenBounds {
  const bytes = [0, 0, 0, 0, 0, 0, 0, 0];
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes[ASCII_CLASS[c]]++;
    else if (c < 0x800) bytes[7] += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      // A surrogate pair: one 4-byte character, outside every CJK block above.
      bytes[7] += 4;
      i++;
    } else bytes[classOf(c)] += 3;
  }
  const max = CLASS_MAX[tokenizer];
  let floor = 0;
  let ceiling = 0;
  for (let k = 0; k < bytes.length; k++) {
    ceiling += bytes[k];
    floor = Math.max(floor, Math.ceil(bytes[k] / max[k]));
  }
  return { floor, ceiling };
}

/**
 * Whether `text`'s floor is past `limit`: the pass of {@link tokenBounds}, but
 * stopping as soon as one class alone needs more than `limit` tokens (4 MB of
 * one letter is decided within its first 852 KB against 32,768 tokens).
 */
export function floorExceeds(text: string, tokenizer: TokenizerName, limit: number): boolean {
  const max = CLASS_MAX[tokenizer];
  // Bytes of a class past which that class alone needs more than `limit` tokens.
  const cap = max.map((m) => limit * m);
  const bytes = [0, 0, 0, 0, 0, 0, 0, 0];
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    let k: number;
    if (c < 0x80) {
      k = ASCII_CLASS[c];
      bytes[k]++;
    } else if (c < 0x800) {
      k = 7;
      bytes[7] += 2;
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      k = 7;
      bytes[7] += 4;
      i++;
    } else {
      k = classOf(c);
      bytes[k] += 3;
    }
    if (bytes[k] > cap[k]) return true;
  }
  return false;
}

/** UTF-8 byte length of `text` (the ceiling alone). */
export function utf8Length(text: string): number {
  let b = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) b++;
    else if (c < 0x800) b += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      b += 4;
      i++;
    } else b += 3;
  }
  return b;
}
