/**
 * The upstream body from the client's bytes. An upstream body is mostly
 * the client's body with a few top-level members changed (the upstream's model
 * name, the output cap, `stream_options`, a cache salt). Serializing the whole
 * parsed value again costs as much as parsing it (a 256 KB prompt of code is
 * mostly escapes, V8's slow path) and then as much again to encode it; copying
 * the members that did not change from the client's bytes costs a `memcpy`.
 *
 * What is sent parses to the value `JSON.stringify(out)` would have sent: a
 * member is copied only when its value in `out` is JSON-equal (below) to the
 * value the client's bytes of that member parse to; every other member is
 * serialized as `JSON.stringify` would serialize it, in `out`'s order. The one
 * difference is spelling (the client's whitespace, escapes and number literals
 * are kept), which the receipt binds as it binds any forwarded bytes; when no
 * member changed, the client's bytes themselves are sent (and hashed once).
 */
import type { JsonDocument } from "./body.ts";
import { concatBytes } from "../aci/mod.ts";

const encoder = new TextEncoder();

/** `encoder.encode(JSON.stringify(out))`, spliced from `doc`'s bytes where they say the same. */
export function spliceJson(doc: JsonDocument, out: unknown): Uint8Array<ArrayBuffer> {
  const members = doc.members;
  const source = doc.value;
  if (members === null || !isPlainObject(out) || !isPlainObject(source)) return serialize(out);
  const pieces: (Uint8Array | string[])[] = [];
  let copied = 0;
  let serialized = 0;
  for (const key of Object.keys(out)) {
    const v = out[key];
    // JSON.stringify leaves these members out.
    if (v === undefined || typeof v === "function" || typeof v === "symbol") continue;
    const range = members.get(key);
    if (range !== undefined && jsonEqual(v, source[key])) {
      pieces.push(doc.bytes.subarray(range[0], range[1]));
      copied++;
    } else {
      // Throws as JSON.stringify(out) would (a cycle, a BigInt): the caller's error either way.
      const text = [JSON.stringify(key) + ":"];
      if (!jsonFragments(v, key, text, FRAGMENT_DEPTH)) continue; // a toJSON giving undefined: left out
      serialized++;
      pieces.push(text);
    }
  }
  // Every member as the client sent it (in whatever order the validator left them, which
  // does not change the value): the client's bytes themselves.
  if (serialized === 0 && copied === members.size) return whole(doc.bytes);
  return join(pieces);
}

/**
 * The client's bytes as they are: the same bytes, so the same hash as received.
 * Copied only when they are a view into a larger buffer.
 */
function whole(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  if (
    bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 &&
    bytes.byteLength === bytes.buffer.byteLength
  ) {
    return bytes as Uint8Array<ArrayBuffer>;
  }
  return bytes.slice();
}

function serialize(out: unknown): Uint8Array<ArrayBuffer> {
  return encoder.encode(JSON.stringify(out));
}

/**
 * Freezes a parsed value (objects and arrays, all the way down), so that nothing
 * between the parse and the splice can change the value the client's bytes are
 * compared by without changing the bytes: such a write throws instead of
 * forwarding bytes that no longer say what the value does.
 */
export function freezeJson(v: unknown): void {
  if (v === null || typeof v !== "object" || Object.isFrozen(v)) return;
  Object.freeze(v);
  if (Array.isArray(v)) { for (const x of v) freezeJson(x); }
  else for (const k in v) freezeJson((v as Record<string, unknown>)[k]);
}

/**
 * `{` pieces joined by `,` `}`: byte pieces copied, text pieces encoded a run
 * of fragments at a time (each run well under V8's large-object size).
 */
function join(pieces: (Uint8Array | string[])[]): Uint8Array<ArrayBuffer> {
  const parts: Uint8Array[] = [OPEN];
  pieces.forEach((p, i) => {
    if (i > 0) parts.push(COMMA);
    if (p instanceof Uint8Array) {
      parts.push(p);
      return;
    }
    let run = "";
    for (const f of p) {
      if (run.length > 0 && run.length + f.length > RUN_CHARS) {
        parts.push(encoder.encode(run));
        run = "";
      }
      run += f;
    }
    parts.push(encoder.encode(run));
  });
  parts.push(CLOSE);
  return concatBytes(parts);
}

const OPEN = Uint8Array.of(0x7b); // {
const COMMA = Uint8Array.of(0x2c); // ,
const CLOSE = Uint8Array.of(0x7d); // }

/** Text runs encoded at most this long (UTF-16 units): a two-byte run stays a regular heap object. */
const RUN_CHARS = 16 * 1024;

/** Containers down to this depth are serialized a value at a time (a body's messages and their parts). */
const FRAGMENT_DEPTH = 4;

/**
 * Appends the text JSON.stringify gives `v` as the member `key` of a value
 * it serializes, as fragments whose concatenation is exactly that text; false
 * (nothing appended) where it gives none. Plain arrays and objects down to `depth` are taken apart, so a
 * long translated conversation never becomes one large string (what V8 maps
 * fresh pages for: docs/decisions/prompt-pieces.md); anything else (a
 * `toJSON`, a class instance, a value deeper down) is JSON.stringify's own.
 */
export function jsonFragments(v: unknown, key: string, out: string[], depth: number): boolean {
  if (depth > 0 && v !== null && typeof v === "object" && takenApart(v)) {
    if (Array.isArray(v)) {
      out.push("[");
      for (let i = 0; i < v.length; i++) {
        if (i > 0) out.push(",");
        if (!jsonFragments(v[i], String(i), out, depth - 1)) out.push("null");
      }
      out.push("]");
      return true;
    }
    out.push("{");
    let first = true;
    for (const k of Object.keys(v)) {
      const mark = out.length;
      out.push((first ? "" : ",") + JSON.stringify(k) + ":");
      if (jsonFragments((v as Record<string, unknown>)[k], k, out, depth - 1)) first = false;
      else out.length = mark;
    }
    out.push("}");
    return true;
  }
  let text: string | undefined;
  if (
    v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function"
  ) {
    // toJSON is called with the member's key: serialized as the one member of a holder.
    const held = JSON.stringify({ [key]: v });
    text = held === "{}" ? undefined : held.slice(JSON.stringify(key).length + 2, -1);
  } else text = JSON.stringify(v);
  if (text === undefined) return false;
  out.push(text);
  return true;
}

/** A plain array or object without a `toJSON`: JSON.stringify lists its members as they are. */
function takenApart(v: object): boolean {
  const proto = Object.getPrototypeOf(v);
  const plain = Array.isArray(v)
    ? proto === Array.prototype
    : proto === Object.prototype || proto === null;
  return plain && typeof (v as { toJSON?: unknown }).toJSON !== "function";
}

/**
 * Would `JSON.parse(JSON.stringify(a))` be deep-equal to `b`, where `b` is a value
 * JSON.parse made (strings, finite numbers, booleans, null, arrays, plain
 * objects, nothing undefined)? Conservative: anything JSON.stringify would
 * transform (`toJSON`, class instances, BigInt, functions and undefined inside
 * arrays) is unequal, so that member is serialized as before. `-0` is unequal
 * too: the client's `-0` parses to -0, JSON.stringify sends `0`. Strings the
 * parser and the validator share compare by pointer; recursion is bounded by
 * `b`'s depth, which the strict parse bounded.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (typeof b === "string") return a === b;
  if (typeof b === "number") return typeof a === "number" && a === b && !Object.is(b, -0);
  if (typeof b === "boolean" || b === null) return a === b;
  if (Array.isArray(b)) {
    if (!Array.isArray(a) || a.length !== b.length) return false;
    for (let i = 0; i < b.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (!isPlainObject(a) || !isPlainObject(b)) return false;
  let n = 0;
  for (const k in a) {
    if (!Object.hasOwn(a, k)) continue; // inherited: not an own property, stringify skips it
    const v = a[k];
    if (v === undefined) continue; // left out by JSON.stringify, absent from `b`
    if (!Object.hasOwn(b, k) || !jsonEqual(v, b[k])) return false;
    n++;
  }
  return n === Object.keys(b).length;
}

/** An object JSON.stringify writes member by member: no `toJSON`, no class, not an array. */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return (proto === Object.prototype || proto === null) &&
    typeof (v as { toJSON?: unknown }).toJSON !== "function";
}
