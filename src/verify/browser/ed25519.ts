/**
 * Browser build of src/aci/ed25519.ts, verification only (the page never
 * signs); swapped in by enclave/build_verify_page.ts. Strict RFC 8032
 * verification (no ZIP-215 leniency), as node:crypto does; the page re-verifies with
 * WebCrypto's Ed25519 where the browser has it (page.ts).
 */
import { ed25519 } from "@noble/curves/ed25519.js";

export function ed25519Verify(
  publicKey: Uint8Array,
  signature: Uint8Array,
  message: Uint8Array,
): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  try {
    return ed25519.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}
