/**
 * Browser build of src/e2ee/aead.ts (same exports), swapped in by the
 * verifying client's browser bundle (`build.ts` here): HKDF from
 * @noble/hashes and AES-256-GCM from @noble/ciphers, synchronous like the
 * node:crypto original (WebCrypto's are async, and the field cipher is not).
 */
import { gcm } from "@noble/ciphers/aes.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { sha256 } from "@noble/hashes/sha2.js";

export function hkdfAesKey(shared: Uint8Array, info: string): Uint8Array {
  return hkdf(sha256, shared, undefined, new TextEncoder().encode(info), 32);
}

export function gcmSeal(
  key: Uint8Array,
  iv: Uint8Array,
  plaintext: Uint8Array,
  aad: Uint8Array,
): Uint8Array {
  return gcm(key, iv, aad).encrypt(plaintext);
}

export function gcmOpen(
  key: Uint8Array,
  iv: Uint8Array,
  sealed: Uint8Array,
  aad: Uint8Array,
): Uint8Array {
  return gcm(key, iv, aad).decrypt(sealed);
}
