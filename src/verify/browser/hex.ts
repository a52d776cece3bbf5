/**
 * Browser build of src/aci/hex.ts (same exports, no node:buffer); swapped in
 * by enclave/build_verify_page.ts.
 */

export function bytesToHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

export function parseHex(hex: string): Uint8Array | null {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) return null;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function hexToBytes(hex: string): Uint8Array {
  const out = parseHex(hex);
  if (out === null) throw new Error("invalid hex string");
  return out;
}

export function isLowerHex(value: unknown, bytes: number): value is string {
  return typeof value === "string" && value.length === 2 * bytes && /^[0-9a-f]*$/.test(value);
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}
