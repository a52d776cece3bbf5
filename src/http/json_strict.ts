/**
 * What the strict parse refuses beyond JSON itself, shared by the whole-text
 * parse (body.ts) and the parse in pieces (json_pieces.ts): duplicate keys,
 * nesting too deep, unpaired surrogate escapes; and the decoder both use.
 */
import { GatewayError } from "./errors.ts";

// ignoreBOM keeps a leading BOM in the text, so JSON.parse refuses it like any other
// stray byte: the hashed bytes and the parsed value must describe the same document.
// Not `fatal`: the bytes are validated first by `isUtf8` (the same strict UTF-8 as the
// fatal decoder, which the unit tests check), and the replacing decoder's single pass is
// faster than the fatal one on a long prompt (docs/decisions/prompt-bytes.md).
export const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

export function duplicateKey(key: string): GatewayError {
  const shown = key.length > 40 ? key.slice(0, 40) + "…" : key;
  return new GatewayError("invalid_request", `duplicate key "${shown}" in JSON object`);
}

export function tooDeep(maxDepth: number): GatewayError {
  return new GatewayError("invalid_request", `JSON nesting deeper than ${maxDepth} levels`);
}

export function unpairedSurrogate(): GatewayError {
  return new GatewayError(
    "invalid_request",
    "request body contains an unpaired UTF-16 surrogate escape (not I-JSON)",
  );
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/g;

/**
 * Does the text hold a `\uD800`–`\uDFFF` escape? Found by one native regex scan
 * (cheaper than a JS cursor over a prompt of code's many backslashes); a match
 * whose backslash is itself escaped (`\\uD83D` in a prompt quoting source code)
 * is not one, and does not cost the walk over the value. Linear: the backslash
 * runs counted back from each match are disjoint.
 */
export function surrogateEscape(text: string): boolean {
  SURROGATE_ESCAPE.lastIndex = 0;
  for (let m; (m = SURROGATE_ESCAPE.exec(text)) !== null;) {
    let k = m.index - 1;
    while (k >= 0 && text.charCodeAt(k) === 0x5c) k--;
    if ((m.index - 1 - k) % 2 === 0) return true;
  }
  return false;
}

/**
 * Unpaired surrogates cannot be encoded as UTF-8: forwarding, hashing or
 * signing such a string would silently turn it into U+FFFD or fail, so the
 * value read would not be the value sent on. Depth is already bounded.
 */
export function wellFormed(v: unknown): boolean {
  if (typeof v === "string") return v.isWellFormed();
  if (Array.isArray(v)) return v.every(wellFormed);
  if (v !== null && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) if (!k.isWellFormed() || !wellFormed(x)) return false;
  }
  return true;
}
