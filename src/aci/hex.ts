/**
 * The one hex codec: ACI artifacts and attestation evidence. Output is
 * lowercase hex without `0x`; decoding is strict (even length, hex digits
 * only) so malformed input is an error instead of silently becoming different
 * bytes (unlike `Buffer.from(s, "hex")`, which stops at the first bad
 * character). `hexToBytes` throws; `parseHex` returns null, for evidence
 * parsers that report a reason instead.
 */

import { Buffer } from "node:buffer";

/** Lowercase hex of `bytes` (natively: a string built per byte is garbage on every request). */
export function bytesToHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
}

const HEX_RE = /^(?:[0-9a-fA-F]{2})*$/;

/** Bytes of a hex string (either case, no `0x`), or null when it is not whole bytes of hex. */
export function parseHex(hex: string): Uint8Array | null {
  if (!HEX_RE.test(hex)) return null;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Bytes of a hex string (either case, no `0x`); throws on odd length or a non-hex digit. */
export function hexToBytes(hex: string): Uint8Array {
  const out = parseHex(hex);
  if (out === null) throw new Error("invalid hex string");
  return out;
}

/** True when `value` is exactly `bytes` bytes of lowercase hex (the ACI encoding). */
export function isLowerHex(value: unknown, bytes: number): value is string {
  return typeof value === "string" && value.length === 2 * bytes && /^[0-9a-f]*$/.test(value);
}

/** Constant-shape byte comparison (lengths must match). */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}
