/**
 * Lowercase hex read and written in place, by char code: for hot loops that
 * must not slice strings or allocate (a digest's hex decoded into the hash
 * slab, digest.ts; a stored receipt's digests packed, receipts/stored_row.ts).
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
