/**
 * Byte-array plumbing: concatenation, and copies backed by a plain
 * ArrayBuffer (what WebCrypto's `BufferSource` demands).
 */

/** Concatenates byte arrays (`total`, their summed length, when the caller already has it). */
export function concatBytes(
  parts: readonly Uint8Array[],
  total = parts.reduce((n, p) => n + p.length, 0),
): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(total);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** A copy of `b` backed by its own ArrayBuffer. */
export function ownBytes(b: Uint8Array): Uint8Array<ArrayBuffer> {
  return new Uint8Array(b);
}
