/**
 * Recorded evidence comes as providers and projects store it: raw bytes, hex
 * or base64 text (optionally gzip'd), or JSON around them. These helpers turn
 * each into bytes without guessing beyond what the shapes allow.
 */
import { gunzipSync } from "node:zlib";
import { parseHex } from "../../aci/mod.ts";

/** The input as JSON, or undefined when it is not JSON. */
export function asJson(input: Uint8Array): unknown {
  const text = new TextDecoder().decode(input).trim();
  if (!text.startsWith("{") && !text.startsWith("[")) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Evidence is a few kB; a gzip member that inflates beyond this is not evidence. */
const MAX_INFLATED = 4 * 1024 * 1024;

function gunzipIfGzip(b: Uint8Array): Uint8Array | null {
  if (b.length < 3 || b[0] !== 0x1f || b[1] !== 0x8b) return b;
  try {
    return new Uint8Array(gunzipSync(b, { maxOutputLength: MAX_INFLATED }));
  } catch {
    return null;
  }
}

/** Hex (optionally 0x-prefixed) or base64 text to bytes (gunzipped when gzip); null otherwise. */
export function textToBytes(text: string): Uint8Array | null {
  const t = text.trim();
  const h = t.startsWith("0x") ? t.slice(2) : t;
  if (h.length > 0 && h.length % 2 === 0 && /^[0-9a-fA-F]+$/.test(h)) {
    return gunzipIfGzip(parseHex(h)!);
  }
  if (t.length > 0 && /^[A-Za-z0-9+/=\s]+$/.test(t)) {
    try {
      return gunzipIfGzip(Uint8Array.from(atob(t.replace(/\s+/g, "")), (c) => c.charCodeAt(0)));
    } catch {
      return null;
    }
  }
  return null;
}

/**
 * A binary artefact from a file: the bytes themselves when `looksBinary` says
 * so, else the file read as hex or base64 text.
 */
export function binaryOrText(
  input: Uint8Array,
  looksBinary: (b: Uint8Array) => boolean,
): Uint8Array | null {
  if (looksBinary(input)) return input;
  const decoded = textToBytes(new TextDecoder().decode(input));
  if (decoded && looksBinary(decoded)) return decoded;
  return decoded ?? null;
}
