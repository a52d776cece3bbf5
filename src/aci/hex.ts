/**
 * Hex encoding for ACI artifacts. ACI writes lowercase hex without `0x`;
 * decoding is strict (even length, hex digits only) so malformed input is an
 * error instead of silently becoming different bytes.
 */

import { Buffer } from "node:buffer";

/** Lowercase hex of `bytes` (natively: a string built per byte is garbage on every request). */
export function bytesToHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
}

/** Bytes of a hex string (either case, no `0x`); throws on odd length or a non-hex digit. */
export function hexToBytes(hex: string): Uint8Array {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
    throw new Error("invalid hex string");
  }
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
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
