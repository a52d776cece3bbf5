/**
 * RFC 8785 JSON Canonicalization Scheme. Every hash or signature over one of
 * our own JSON documents (keyset, receipt, session, statement) is over this
 * form, so the served encoding stays free.
 */

import canonicalize from "canonicalize";

const encoder = new TextEncoder();

/**
 * The JCS string of `value`. Throws when `value` has no JSON form (undefined,
 * a function, a symbol) or holds NaN/Infinity, a lone surrogate or a cycle:
 * `canonicalize` would return `undefined` for the first case, which must never
 * be hashed as if it were a document.
 */
export function jcs(value: unknown): string {
  const out = canonicalize(value);
  if (typeof out !== "string") throw new Error("value has no JSON representation");
  return out;
}

/** UTF-8 bytes of the JCS form of `value`. */
export function jcsBytes(value: unknown): Uint8Array {
  return encoder.encode(jcs(value));
}
