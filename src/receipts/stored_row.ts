/**
 * The stored receipt row: a receipt's JCS text, its owner's key digest and
 * its expiry packed into one `Uint8Array`, exactly reversible.
 *
 * Why: the JSON row (`{"receipt":<JCS>,"owner":…,"until":…}`, ~1,350 bytes
 * for the gateway's usual receipt) was larger than SQLite's 1,002-byte local
 * payload in Deno KV's table (WITHOUT ROWID, 4 KiB pages), so each receipt
 * took a 4 KiB overflow page of its own (bench/RESULTS.md, "Receipt CPU").
 * Deflate fixed the size but cost more CPU than the commit saved; this is a
 * substitution that needs no compression library and no search state.
 *
 * Layout: byte 0 the format; bytes 1..8 `until` (float64, big-endian);
 * byte 9 the owner's kind (0 none, 1 a 64-lowercase-hex digest as 32 bytes,
 * 2 any other string as u16 length + UTF-8); then the receipt text.
 * Format 1 packs the text: JCS never holds a raw byte below 0x20 (it escapes
 * them), so those bytes are free to be tags: 0x01 + n + n bytes stands for a
 * run of 2n lowercase hex digits (hashes, signature, ids), 0x02.. for one of
 * the fixed phrases below (the receipt's member names and common events).
 * Format 0 is the text as UTF-8, for a text that holds a control byte (never
 * expected; packing would be ambiguous there). The phrases are part of the
 * stored format: never change format 1's list, add a format instead.
 */
import { Buffer } from "node:buffer";
import { lowerHexValue, writeLowerHex } from "../aci/mod.ts";

/** What a stored receipt row holds (the receipt still as its JCS text). */
export interface ReceiptRow {
  /** The signed receipt's JCS text, byte for byte as signed and served. */
  jcs: string;
  /** Key digest of the owning API key, or null (no key). */
  owner: string | null;
  /** Epoch ms. */
  until: number;
}

const FORMAT_PLAIN = 0;
const FORMAT_PACKED = 1;
const HEX_TAG = 0x01;
const FIRST_PHRASE_TAG = 0x02;
const OWNER_NONE = 0;
const OWNER_DIGEST = 1;
const OWNER_TEXT = 2;
/** Format byte, until, owner kind. */
const HEADER_BYTES = 10;
/** Shorter hex runs stay text: a tag and a length cost two bytes, and most short runs are not hex data. */
const MIN_HEX_RUN = 32;
const MAX_HEX_RUN = 2 * 255;

/**
 * Format 1's phrases, tags 0x02..0x1f in this order. Boilerplate of the
 * receipt's JCS (members sort as JCS sorts them) and of the events the
 * gateway records, chosen so the usual receipt is mostly tags and hex bytes.
 */
const PHRASES: readonly string[] = [
  '{"api_version":"aci/1","chat_id":',
  ',"endpoint":"/v1/chat/completions","event_log":[',
  ',"endpoint":"/v1/',
  '","event_log":[',
  '{"body_hash":"sha256:',
  '","type":"request.received"}',
  '","type":"middleware.forwarded"}',
  '","type":"request.forwarded"}',
  '","type":"response.received"}',
  '","type":"response.returned"}',
  '{"attempt":',
  ',"target_route_id":"',
  '","type":"route.selected"}',
  '","type":"route.served"}',
  '","type":"upstream.attempt_failed"}',
  '{"type":"transparency.request_modified"}',
  '{"type":"transparency.response_modified"}',
  '{"reason":"',
  ',"model_id":"',
  ',"required":true,"result":"verified","session_id":"',
  ',"required":false,"result":"verified","session_id":"',
  '","tee_attested":"hardware_proven","type":"upstream.verified"}',
  '","type":"request.refused"}',
  '],"key_id":"ed25519:',
  ',"method":"POST","model":',
  ',"receipt_id":"rcpt-',
  '","served_at":',
  ',"signature":"',
  '","workload_keyset_digest":"sha256:',
];

if (FIRST_PHRASE_TAG + PHRASES.length > 0x20) throw new Error("stored_row: too many phrases");

/** A phrase's first four characters as one small integer (its lookup key; collisions are checked). */
function key4(s: string, i: number): number {
  return (s.charCodeAt(i) & 0x7f) | ((s.charCodeAt(i + 1) & 0x7f) << 7) |
    ((s.charCodeAt(i + 2) & 0x7f) << 14) | ((s.charCodeAt(i + 3) & 0x7f) << 21);
}

interface Phrase {
  phrase: string;
  tag: number;
}

const TYPE_OPEN = '","type":"';
const TYPE_OPEN_KEY = key4(TYPE_OPEN, 0);

/** Key of an event type's name: its first four characters and its length. */
function typeKey(s: string, i: number, length: number): number {
  return key4(s, i) + (length & 3) * 0x10000000;
}

/** `","type":"<name>"}` phrases by their name's key (see typeKey). */
const TYPE_PHRASES = new Map<number, Phrase[]>();
/** The other phrases by their first four characters, longest first. */
const PHRASES_BY_KEY = new Map<number, Phrase[]>();
PHRASES.forEach((phrase, i) => {
  if (phrase.length < 4 || !/^[{,"\]]/.test(phrase)) throw new Error("stored_row: bad phrase");
  const name = phrase.slice(TYPE_OPEN.length, -2);
  const typed = phrase.startsWith(TYPE_OPEN) && phrase.endsWith('"}') && !name.includes('"');
  const [map, k] = typed
    ? [TYPE_PHRASES, typeKey(name, 0, name.length)]
    : [PHRASES_BY_KEY, key4(phrase, 0)];
  const group = map.get(k) ?? [];
  group.push({ phrase, tag: FIRST_PHRASE_TAG + i });
  group.sort((a, b) => b.phrase.length - a.phrase.length);
  map.set(k, group);
});

/** The first of `group` that `text` holds at `i`, or undefined. */
function phraseAt(group: Phrase[] | undefined, text: string, i: number): Phrase | undefined {
  if (group === undefined) return undefined;
  for (let g = 0; g < group.length; g++) {
    if (text.startsWith(group[g].phrase, i)) return group[g];
  }
  return undefined;
}

const DIGEST_RE = /^[0-9a-f]{64}$/;
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

function utf8(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new Error("corrupt stored receipt");
  }
}

function isHexDigit(c: number): boolean {
  return lowerHexValue(c) >= 0;
}

/** Reused between calls (encoding is synchronous); the result is a copy of its start. */
let scratch = new Uint8Array(4096);
let scratchView = new DataView(scratch.buffer);

/** The row's bytes for `row`. */
export function encodeReceiptRow(row: ReceiptRow): Uint8Array {
  const ownerMax = row.owner === null ? 0 : 3 + 3 * row.owner.length;
  const need = HEADER_BYTES + ownerMax + 3 * row.jcs.length;
  if (scratch.length < need) {
    scratch = new Uint8Array(need);
    scratchView = new DataView(scratch.buffer);
  }
  const out = scratch;
  let pos = writeHeader(out, scratchView, row);
  const packed = packText(row.jcs, out, pos);
  if (packed >= 0) {
    out[0] = FORMAT_PACKED;
    pos = packed;
  } else {
    out[0] = FORMAT_PLAIN;
    pos += encoder.encodeInto(row.jcs, out.subarray(pos)).written;
  }
  return out.slice(0, pos);
}

/** Writes bytes 1.. of the header and the owner; returns where the text starts. */
function writeHeader(out: Uint8Array, view: DataView, row: ReceiptRow): number {
  view.setFloat64(1, row.until);
  if (row.owner === null) {
    out[9] = OWNER_NONE;
    return HEADER_BYTES;
  }
  if (DIGEST_RE.test(row.owner)) {
    out[9] = OWNER_DIGEST;
    writeLowerHex(row.owner, 0, 32, out, HEADER_BYTES);
    return HEADER_BYTES + 32;
  }
  out[9] = OWNER_TEXT;
  const n = encoder.encodeInto(row.owner, out.subarray(HEADER_BYTES + 2)).written;
  if (n > 0xffff) throw new RangeError("receipt owner too long");
  out[HEADER_BYTES] = n >> 8;
  out[HEADER_BYTES + 1] = n & 0xff;
  return HEADER_BYTES + 2 + n;
}

/**
 * Packs `text` into `out` from `pos`; the end, or -1 when it holds a byte
 * below 0x20. One pass: phrases are looked up only where one can start (at
 * `{`, `,`, `"`, `]`), hex runs only at a hex digit, and neither is scanned
 * again once matched.
 */
function packText(text: string, out: Uint8Array, pos: number): number {
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22 || c === 0x2c || c === 0x7b || c === 0x5d) {
      const k = key4(text, i);
      let hit: Phrase | undefined;
      if (k === TYPE_OPEN_KEY && text.startsWith(TYPE_OPEN, i)) {
        // An event's type: found by its name's key, not by trying each type.
        const name = i + TYPE_OPEN.length;
        const q = text.indexOf('"', name);
        if (q > 0) hit = phraseAt(TYPE_PHRASES.get(typeKey(text, name, q - name)), text, i);
      }
      hit ??= phraseAt(PHRASES_BY_KEY.get(k), text, i);
      if (hit !== undefined) {
        out[pos++] = hit.tag;
        i += hit.phrase.length;
        continue;
      }
      out[pos++] = c;
      i++;
    } else if (isHexDigit(c)) {
      // Decode digit pairs straight into place; a run too short to pack is
      // written again as text over them.
      const start = pos;
      let j = i;
      pos += 2;
      while (j + 1 < n && j - i < MAX_HEX_RUN) {
        const hi = lowerHexValue(text.charCodeAt(j));
        const lo = lowerHexValue(text.charCodeAt(j + 1));
        if ((hi | lo) < 0) break;
        out[pos++] = (hi << 4) | lo;
        j += 2;
      }
      if (j - i < MIN_HEX_RUN) {
        pos = start;
        // At least the first digit is text; the rest is looked at again.
        const end = j === i ? i + 1 : j;
        for (; i < end; i++) out[pos++] = text.charCodeAt(i);
        continue;
      }
      out[start] = HEX_TAG;
      out[start + 1] = (j - i) >> 1;
      i = j;
    } else if (c >= 0x20 && c < 0x80) {
      out[pos++] = c;
      i++;
    } else if (c < 0x20) {
      return -1;
    } else {
      // A non-ASCII character (JCS text is well-formed UTF-16): its UTF-8.
      const cp = text.codePointAt(i)!;
      if (cp >= 0xd800 && cp <= 0xdfff) throw new Error("receipt text is not well-formed");
      i += cp > 0xffff ? 2 : 1;
      pos = writeUtf8(cp, out, pos);
    }
  }
  return pos;
}

function writeUtf8(cp: number, out: Uint8Array, pos: number): number {
  if (cp < 0x800) {
    out[pos++] = 0xc0 | (cp >> 6);
  } else if (cp < 0x10000) {
    out[pos++] = 0xe0 | (cp >> 12);
    out[pos++] = 0x80 | ((cp >> 6) & 0x3f);
  } else {
    out[pos++] = 0xf0 | (cp >> 18);
    out[pos++] = 0x80 | ((cp >> 12) & 0x3f);
    out[pos++] = 0x80 | ((cp >> 6) & 0x3f);
  }
  out[pos++] = 0x80 | (cp & 0x3f);
  return pos;
}

/** The row stored as `bytes`; throws on a malformed row. */
export function decodeReceiptRow(bytes: Uint8Array): ReceiptRow {
  if (bytes.length < HEADER_BYTES) throw new Error("corrupt stored receipt");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const until = view.getFloat64(1);
  let pos = HEADER_BYTES;
  let owner: string | null;
  switch (bytes[9]) {
    case OWNER_NONE:
      owner = null;
      break;
    case OWNER_DIGEST:
      if (bytes.length < pos + 32) throw new Error("corrupt stored receipt");
      owner = hex(bytes, pos, 32);
      pos += 32;
      break;
    case OWNER_TEXT: {
      const n = view.getUint16(pos);
      if (bytes.length < pos + 2 + n) throw new Error("corrupt stored receipt");
      owner = utf8(bytes.subarray(pos + 2, pos + 2 + n));
      pos += 2 + n;
      break;
    }
    default:
      throw new Error("corrupt stored receipt");
  }
  let jcs: string;
  if (bytes[0] === FORMAT_PLAIN) jcs = utf8(bytes.subarray(pos));
  else if (bytes[0] === FORMAT_PACKED) jcs = unpackText(bytes, pos);
  else throw new Error("corrupt stored receipt");
  return { jcs, owner, until };
}

function hex(bytes: Uint8Array, at: number, n: number): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + at, n).toString("hex");
}

function unpackText(bytes: Uint8Array, pos: number): string {
  const parts: string[] = [];
  let literal = pos;
  const flush = (end: number) => {
    if (end > literal) parts.push(utf8(bytes.subarray(literal, end)));
  };
  while (pos < bytes.length) {
    const b = bytes[pos];
    if (b >= 0x20) {
      pos++;
      continue;
    }
    flush(pos);
    if (b === HEX_TAG) {
      const n = bytes[pos + 1];
      if (n === undefined || pos + 2 + n > bytes.length) throw new Error("corrupt stored receipt");
      parts.push(hex(bytes, pos + 2, n));
      pos += 2 + n;
    } else {
      const phrase = b >= FIRST_PHRASE_TAG ? PHRASES[b - FIRST_PHRASE_TAG] : undefined;
      if (phrase === undefined) throw new Error("corrupt stored receipt");
      parts.push(phrase);
      pos++;
    }
    literal = pos;
  }
  flush(pos);
  return parts.join("");
}
