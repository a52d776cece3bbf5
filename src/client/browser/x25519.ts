/**
 * Browser build of src/e2ee/x25519.ts (same exports), swapped in by the
 * verifying client's browser bundle (`build.ts` here): @noble/curves, which
 * throws on an all-zero shared secret as node:crypto does.
 */
import { x25519 } from "@noble/curves/ed25519.js";

export function x25519PublicKey(secretKey: Uint8Array): Uint8Array {
  return x25519.getPublicKey(secretKey);
}

export function x25519SharedSecret(secretKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
  return x25519.getSharedSecret(secretKey, publicKey);
}
