/**
 * Strict hex codec for attestation evidence. Unlike `Buffer.from(s, "hex")`,
 * which silently stops at the first bad character, a malformed string is an
 * error here: evidence that does not decode must not half-decode.
 */

const HEX_RE = /^(?:[0-9a-fA-F]{2})*$/;

/** Decodes hex (either case) or returns null when it is not whole bytes of hex. */
export function hexToBytes(hex: string): Uint8Array | null {
  if (!HEX_RE.test(hex)) return null;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Lowercase hex of the bytes. */
export function bytesToHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

/** Constant-shape byte comparison (lengths and contents). */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}
