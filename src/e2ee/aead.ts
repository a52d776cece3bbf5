/**
 * The E2EE field cipher's symmetric half (spec/e2ee-v2.md §4): HKDF-SHA256
 * with no salt, then AES-256-GCM. node:crypto here, on the gateway's request
 * path; the verifying client's browser bundle swaps in
 * `src/client/browser/aead.ts` (same exports, pure JS).
 */
import { createCipheriv, createDecipheriv, hkdfSync } from "node:crypto";

const TAG_LEN = 16;

/** The 32-byte AES key: HKDF-SHA256(shared, salt = none, info). */
export function hkdfAesKey(shared: Uint8Array, info: string): Uint8Array {
  // No salt (RFC 5869: HashLen zero bytes, which an empty salt equals).
  return new Uint8Array(hkdfSync("sha256", shared, new Uint8Array(0), info, 32));
}

/** AES-256-GCM: ciphertext ‖ 16-byte tag. */
export function gcmSeal(
  key: Uint8Array,
  iv: Uint8Array,
  plaintext: Uint8Array,
  aad: Uint8Array,
): Uint8Array {
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(aad);
  const head = cipher.update(plaintext);
  const tail = cipher.final();
  const out = new Uint8Array(head.length + tail.length + TAG_LEN);
  out.set(head);
  out.set(tail, head.length);
  out.set(cipher.getAuthTag(), head.length + tail.length);
  return out;
}

/** Opens ciphertext ‖ tag; throws when the tag or AAD does not match. */
export function gcmOpen(
  key: Uint8Array,
  iv: Uint8Array,
  sealed: Uint8Array,
  aad: Uint8Array,
): Uint8Array {
  if (sealed.length < TAG_LEN) throw new Error("sealed field shorter than its tag");
  const decipher = createDecipheriv("aes-256-gcm", key, iv);
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_LEN));
  const head = decipher.update(sealed.subarray(0, sealed.length - TAG_LEN));
  const tail = decipher.final();
  const out = new Uint8Array(head.length + tail.length);
  out.set(head);
  out.set(tail, head.length);
  return out;
}
