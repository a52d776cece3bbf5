/**
 * Lowercase hex read and written in place, by char code: for hot loops that
 * must not slice strings or allocate (a digest's hex decoded into the hash
 * slab, digest.ts; a stored receipt's digests packed, receipts/stored_row.ts;
 * a receipt's digest spelled into its log entry, log_entry.ts).
 * Strict parsing of untrusted hex is hex.ts's.
 */

/** Hex digit values by char code (-1: not lowercase hex). */
const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) HEX_VALUE["0123456789abcdef".charCodeAt(i)] = i;

/** 0..15, or -1 when `c` is not a lowercase hex digit. */
export function lowerHexValue(c: number): number {
  return c < 0x80 ? HEX_VALUE[c] : -1;
}

/** Writes the `bytes` bytes spelled by the lowercase hex at `s[from..]` into `out` at `at` (the hex must be valid). */
export function writeLowerHex(
  s: string,
  from: number,
  bytes: number,
  out: Uint8Array,
  at: number,
): void {
  for (let i = 0; i < bytes; i++) {
    const j = from + 2 * i;
    out[at + i] = (HEX_VALUE[s.charCodeAt(j)] << 4) | HEX_VALUE[s.charCodeAt(j + 1)];
  }
}

const HEX_CHAR = new TextEncoder().encode("0123456789abcdef");

/** Writes the lowercase hex of `bytes` bytes of `src` (from `from`) as ASCII into `out` at `at`. */
export function writeHexDigits(
  src: Uint8Array,
  from: number,
  bytes: number,
  out: Uint8Array,
  at: number,
): void {
  for (let i = 0; i < bytes; i++) {
    const b = src[from + i];
    out[at + 2 * i] = HEX_CHAR[b >> 4];
    out[at + 2 * i + 1] = HEX_CHAR[b & 0xf];
  }
}
