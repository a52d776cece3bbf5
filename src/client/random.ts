/**
 * The client's entropy: WebCrypto's `getRandomValues`, present in browsers,
 * Deno and Node ≥ 20 alike (no node:crypto, so the same code loads in a page).
 */

/** `n` cryptographically random bytes. */
export function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  // getRandomValues fills at most 65,536 bytes per call.
  for (let o = 0; o < n; o += 65_536) crypto.getRandomValues(out.subarray(o, o + 65_536));
  return out;
}
