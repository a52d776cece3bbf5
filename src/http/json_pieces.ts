/**
 * A large body parsed in pieces. V8 keeps every string of over 128 KB on
 * pages of its own, mapped fresh for each: decoding a 450 KB body into one
 * text and parsing it touched a new page every 4 KB, and a page fault costs
 * ~15 µs on the bench's VM (docs/decisions/prompt-pieces.md: about a quarter
 * of a coding agent's turn). So the bytes are scanned once for their
 * structure, each container of at least {@link SPLIT_MIN} bytes down to depth
 * {@link SPLIT_DEPTH} (the body, its messages, a message, its parts and theirs) is
 * split into its values, and every other value is decoded and parsed on its
 * own, as a small string on the heap's pooled pages; a long string value is
 * parsed in chunks joined as a rope, which nothing on the request path
 * flattens unless it reads the text: its UTF-8 length, which the prompt's
 * byte ceiling needs, is noted here ({@link textBytes}), measured chunk by chunk.
 *
 * Exactly as strict as the whole-text parse: what holds the pieces together
 * (braces, keys, colons, commas, whitespace, anything around the body) is
 * parsed as one small skeleton, the client's bytes with every piece replaced
 * by `0`. A skeleton that parses with a JSON value where each `0` stood is a
 * document that parses, and to the same value; duplicate keys and depth are
 * checked on every byte by the scan, as the whole-text scan does. Whenever
 * anything does not parse or line up, this returns null and the caller parses
 * the whole text, which refuses the body with its usual error.
 */
import { Buffer } from "node:buffer";
import { concatBytes } from "../aci/mod.ts";
import { decoder, duplicateKey, surrogateEscape, tooDeep, wellFormed } from "./json_strict.ts";

/** Bodies from this size are parsed in pieces (a two-byte text of half of it is a large object). */
export const PIECES_MIN_BYTES = 64 * 1024;
/** A container this large is split into its values; a string this large into chunks. */
export const SPLIT_MIN = 32 * 1024;
/** Pieces at least this large on average, or the body is parsed whole. */
const MIN_PIECE_BYTES = 256;
/** Values recorded by the scan at least this large on average, or it stops (the body is parsed whole). */
const MIN_VALUE_BYTES = 64;
/** Containers deeper than this are pieces whole (depth 1 is the body). */
const SPLIT_DEPTH = 6;

/** A container the scan recorded: where its values sit in the bytes. */
interface Box {
  object: boolean;
  open: number;
  close: number;
  /** Its index among its parent's values. */
  slot: number;
  /** An object's keys, decoded, one per value. */
  keys: string[];
  /** Each value's span, [start, end): from after `:` `[` `,` to the next `,` or the closing bracket. */
  starts: number[];
  ends: number[];
  /** The value at that index when it is itself a recorded container. */
  boxes: (Box | undefined)[];
}

interface Frame {
  keys: Set<string> | null;
  box: Box | undefined;
}

/** A body parsed in pieces: its value and its top-level members' byte ranges. */
export interface Pieces {
  value: unknown;
  members: Map<string, [number, number]>;
}

class Mismatch extends Error {}

/**
 * The body's value, parsed in pieces; null when the body is not an object or
 * anything fails to parse (the caller's whole-text parse then decides). Throws
 * the strict parse's own errors for duplicate keys and depth. `bytes` must be
 * valid UTF-8 (checked by the caller).
 */
export function parseInPieces(
  bytes: Uint8Array,
  maxDepth: number,
  splitMin = SPLIT_MIN,
  /** Below these average sizes of pieces and of recorded values the body is parsed whole (tests: 0). */
  minBytes: { piece: number; value: number } = { piece: MIN_PIECE_BYTES, value: MIN_VALUE_BYTES },
): Pieces | null {
  const scanned = scan(bytes, maxDepth, splitMin, minBytes.value);
  if (scanned === null) return null;
  // Every container the scan kept (under the body) is large enough to split.
  const { top, members } = scanned;
  // Each piece costs a decode and a parse call: a body of many tiny values is parsed whole.
  const count = (box: Box): number => {
    let n = 0;
    for (let k = 0; k < box.starts.length; k++) {
      const child = box.boxes[k];
      n += child ? count(child) : 1;
    }
    return n;
  };
  if (count(top) > bytes.byteLength / minBytes.piece) return null;
  // The skeleton: the bytes with each leaf's span replaced by `0`.
  const glue: Uint8Array[] = [];
  let cursor = 0;
  const leaves = (box: Box): void => {
    for (let k = 0; k < box.starts.length; k++) {
      const child = box.boxes[k];
      if (child) {
        leaves(child);
        continue;
      }
      glue.push(bytes.subarray(cursor, box.starts[k]), ZERO);
      cursor = box.ends[k];
    }
  };
  leaves(top);
  glue.push(bytes.subarray(cursor));
  const skeletonText = decoder.decode(concatBytes(glue));
  let surrogates = maySurrogate(skeletonText);
  let value: unknown;
  try {
    value = JSON.parse(skeletonText);
    const fill = (box: Box, into: unknown): void => {
      if (into === null || typeof into !== "object" || Array.isArray(into) === box.object) {
        throw new Mismatch();
      }
      const holder = into as Record<string, unknown>;
      if (!box.object && (into as unknown[]).length !== box.starts.length) throw new Mismatch();
      for (let k = 0; k < box.starts.length; k++) {
        const at = box.object ? box.keys[k] : k;
        const child = box.boxes[k];
        if (child) {
          fill(child, holder[at]);
          continue;
        }
        if (holder[at] !== 0) throw new Mismatch();
        const leaf = parseLeaf(bytes, box.starts[k], box.ends[k], splitMin);
        if (leaf.surrogates) surrogates = true;
        if (leaf.utf8 !== undefined) noteBytes(holder, at, leaf.utf8);
        if (at === "__proto__") {
          // An own member, as JSON.parse makes it; assigning would set the prototype.
          Object.defineProperty(holder, at, {
            value: leaf.value,
            writable: true,
            enumerable: true,
            configurable: true,
          });
        } else holder[at] = leaf.value;
      }
    };
    fill(top, value);
  } catch (e) {
    if (e instanceof SyntaxError || e instanceof Mismatch) return null;
    throw e;
  }
  // Only a `\uD8xx`-style escape can make an unpaired surrogate (as in body.ts).
  if (surrogates && !wellFormed(value)) return null;
  return { value, members };
}

const ZERO = new Uint8Array([0x30]);

/** {@link surrogateEscape}, after a native search for `\u` (rare in most texts) rules most pieces out. */
function maySurrogate(text: string): boolean {
  return text.includes("\\u") && surrogateEscape(text);
}

/** UTF-8 lengths of the long strings parsed as ropes, by the object or array holding them. */
const TEXT_BYTES = new WeakMap<object, Map<string | number, number>>();

function noteBytes(holder: object, at: string | number, bytes: number): void {
  const known = TEXT_BYTES.get(holder);
  if (known) known.set(at, bytes);
  else TEXT_BYTES.set(holder, new Map([[at, bytes]]));
}

/**
 * The UTF-8 length of `text`, when it is the long string a parse in pieces
 * left at `holder[at]` (checked: the same string), without reading it (the
 * native measure would first copy a rope into one flat string); else undefined.
 */
export function textBytes(holder: unknown, at: string | number, text: string): number | undefined {
  if (holder === null || typeof holder !== "object") return undefined;
  const bytes = TEXT_BYTES.get(holder)?.get(at);
  if (bytes === undefined || (holder as Record<string | number, unknown>)[at] !== text) {
    return undefined;
  }
  return bytes;
}

/**
 * One pass over the bytes (strings skipped with the native `indexOf`): depth
 * and duplicate keys checked everywhere, containers recorded down to
 * {@link SPLIT_DEPTH} and kept when they reach `splitMin` bytes (those are
 * split), top-level members' ranges noted. Right on valid JSON;
 * on anything else, what it records fails to line up or parse later.
 */
function scan(
  bytes: Uint8Array,
  maxDepth: number,
  splitMin: number,
  minValueBytes: number,
): { top: Box; members: Map<string, [number, number]> } | null {
  const n = bytes.length;
  let i = 0;
  while (i < n && isSpace(bytes[i])) i++;
  if (bytes[i] !== 0x7b) return null;
  const stack: Frame[] = [];
  const members = new Map<string, [number, number]>();
  let top: Box | undefined;
  let expectKey = false;
  let memberStart = 0;
  let memberKey: string | null = null;
  // Values recorded so far: a body of many tiny values is parsed whole (each piece costs a call).
  let values = 0;
  const maxValues = n / minValueBytes;
  for (; i < n; i++) {
    const c = bytes[i];
    if (c === 0x22 /* " */) {
      const j = stringEnd(bytes, i);
      if (j >= n) return null;
      const f = stack[stack.length - 1];
      if (expectKey && f?.keys) {
        const key = keyAt(bytes, i, j);
        if (key === null) return null;
        if (f.keys.has(key)) throw duplicateKey(key);
        f.keys.add(key);
        f.box?.keys.push(key);
        if (stack.length === 1) memberKey = key;
        expectKey = false;
      }
      i = j;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const object = c === 0x7b;
      const parent = stack[stack.length - 1];
      let box: Box | undefined;
      if (parent === undefined ? top === undefined : parent.box && stack.length < SPLIT_DEPTH) {
        const slot = parent === undefined ? -1 : parent.box!.starts.length - 1;
        box = {
          object,
          open: i,
          close: -1,
          slot,
          keys: [],
          starts: object ? [] : [i + 1],
          ends: [],
          boxes: [],
        };
        if (!object && ++values > maxValues) return null;
        if (parent === undefined) {
          top = box;
          memberStart = i + 1;
        } else {
          if (slot < 0) return null;
          parent.box!.boxes[slot] = box;
        }
      }
      stack.push({ keys: object ? new Set() : null, box });
      if (stack.length > maxDepth) throw tooDeep(maxDepth);
      expectKey = object;
    } else if (c === 0x3a /* : */) {
      const box = stack[stack.length - 1]?.box;
      if (box?.object && box.starts.push(i + 1) && ++values > maxValues) return null;
    } else if (c === 0x2c /* , */ || c === 0x7d /* } */ || c === 0x5d /* ] */) {
      const f = stack[stack.length - 1];
      if (stack.length === 1 && memberKey !== null) {
        members.set(memberKey, [memberStart, i]);
        memberKey = null;
        memberStart = i + 1;
      }
      const box = f?.box;
      if (box && box.ends.length < box.starts.length) box.ends.push(i);
      if (c === 0x2c) {
        expectKey = f?.keys != null;
        if (box && !box.object && box.starts.push(i + 1) && ++values > maxValues) return null;
      } else {
        if (box) {
          box.close = i;
          // Too small to split: a piece of its parent's, so not kept (a body of many small
          // containers must not hold a record of each).
          if (box !== top && i - box.open < splitMin) {
            const parent = stack[stack.length - 2]?.box;
            if (parent && parent.boxes[box.slot] === box) parent.boxes[box.slot] = undefined;
          }
        }
        stack.pop();
        expectKey = false;
      }
    }
  }
  if (top === undefined || stack.length !== 0 || !linedUp(top, bytes)) return null;
  return { top, members };
}

/** Every recorded container closed, with one span (and key) per value; `[ ]` has none. */
function linedUp(box: Box, bytes: Uint8Array): boolean {
  if (box.close < 0 || box.starts.length !== box.ends.length) return false;
  if (box.object && box.keys.length !== box.starts.length) return false;
  if (!box.object && box.starts.length === 1 && blank(bytes, box.starts[0], box.ends[0])) {
    box.starts.length = 0;
    box.ends.length = 0;
  }
  for (const b of box.boxes) if (b && !linedUp(b, bytes)) return false;
  return true;
}

/**
 * One value: parsed from its own decoded text; a long string in chunks cut
 * between characters and escapes, each parsed as a string of its own and
 * joined (a rope: concatenation does not copy).
 */
function parseLeaf(
  bytes: Uint8Array,
  start: number,
  end: number,
  splitMin: number,
): { value: unknown; surrogates: boolean; utf8?: number } {
  let s = start;
  let e = end;
  while (s < e && isSpace(bytes[s])) s++;
  while (e > s && isSpace(bytes[e - 1])) e--;
  if (e - s < splitMin || bytes[s] !== 0x22 || bytes[e - 1] !== 0x22 || e - s < 2) {
    const text = decoder.decode(bytes.subarray(start, end));
    return { value: JSON.parse(text), surrogates: maySurrogate(text) };
  }
  let value = "";
  let surrogates = false;
  let utf8 = 0;
  let high = false;
  const inner = e - 1;
  for (let at = s + 1; at < inner;) {
    const cut = chunkEnd(bytes, at, Math.min(inner, at + splitMin), inner);
    const text = '"' + decoder.decode(bytes.subarray(at, cut)) + '"';
    const part: unknown = JSON.parse(text);
    if (typeof part !== "string") throw new Mismatch();
    if (maySurrogate(text)) surrogates = true;
    utf8 += Buffer.byteLength(part, "utf8");
    // A pair cut between its escapes counts 3 + 3 bytes apart, 4 joined.
    const low = part.length > 0 && (part.charCodeAt(0) & 0xfc00) === 0xdc00;
    if (high && low) utf8 -= 2;
    high = part.length > 0 && (part.charCodeAt(part.length - 1) & 0xfc00) === 0xd800;
    value += part;
    at = cut;
  }
  return { value, surrogates, utf8 };
}

/**
 * A cut at or after `want` (at most `limit`) that splits neither a UTF-8
 * sequence nor an escape: past continuation bytes, past the character an odd
 * run of backslashes escapes, and past the four digits of a `\u` it lands in.
 */
function chunkEnd(bytes: Uint8Array, from: number, want: number, limit: number): number {
  let b = want;
  while (b < limit && (bytes[b] & 0xc0) === 0x80) b++;
  if (escapes(bytes, from, b)) b += bytes[b] === 0x75 /* u */ ? 5 : 1;
  else {
    for (let d = 1; d <= 4 && b - d > from; d++) {
      if (bytes[b - d] === 0x75 && escapes(bytes, from, b - d)) {
        b = b - d + 5;
        break;
      }
    }
  }
  return Math.min(b, limit);
}

/** Is the byte at `at` escaped: preceded (from `from` on) by an odd run of backslashes? */
function escapes(bytes: Uint8Array, from: number, at: number): boolean {
  let k = at - 1;
  while (k >= from && bytes[k] === 0x5c) k--;
  return (at - 1 - k) % 2 === 1;
}

/** The quote closing the string opened at `open` (or the length): a quote after an odd backslash run is escaped. */
function stringEnd(bytes: Uint8Array, open: number): number {
  let j = open + 1;
  for (;;) {
    j = bytes.indexOf(0x22, j);
    if (j < 0) return bytes.length;
    if (!escapes(bytes, open + 1, j)) return j;
    j++;
  }
}

/** The key whose quotes are at `open` and `close`, decoded; null when it is not a valid string. */
function keyAt(bytes: Uint8Array, open: number, close: number): string | null {
  const inner = bytes.subarray(open + 1, close);
  if (!inner.includes(0x5c)) return decoder.decode(inner);
  try {
    return JSON.parse(decoder.decode(bytes.subarray(open, close + 1)));
  } catch {
    return null;
  }
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function blank(bytes: Uint8Array, start: number, end: number): boolean {
  for (let k = start; k < end; k++) if (!isSpace(bytes[k])) return false;
  return true;
}
