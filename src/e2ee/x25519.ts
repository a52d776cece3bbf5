/**
 * X25519 (RFC 7748) through node:crypto's native implementation: an E2EE
 * field costs one or two scalar multiplications, ~6× cheaper native than in
 * pure JS (docs/decisions/e2ee-x25519-native.md).
 * Raw 32-byte keys are wrapped in the fixed RFC 8410 DER prefixes node:crypto
 * imports. The verifying client's browser bundle swaps in
 * `src/client/browser/x25519.ts` (same exports, @noble/curves).
 */
import { Buffer } from "node:buffer";
import { createPrivateKey, createPublicKey, diffieHellman, type KeyObject } from "node:crypto";

const PKCS8_PREFIX = Buffer.from("302e020100300506032b656e04220420", "hex");
const SPKI_PREFIX = Buffer.from("302a300506032b656e032100", "hex");

function privateKey(secretKey: Uint8Array): KeyObject {
  if (secretKey.length !== 32) throw new Error("X25519 secret key must be 32 bytes");
  return createPrivateKey({
    key: Buffer.concat([PKCS8_PREFIX, secretKey]),
    format: "der",
    type: "pkcs8",
  });
}

/** The public key (u-coordinate) of a 32-byte secret key (clamped as RFC 7748 says). */
export function x25519PublicKey(secretKey: Uint8Array): Uint8Array {
  const der = createPublicKey(privateKey(secretKey)).export({ format: "der", type: "spki" });
  return new Uint8Array(der.subarray(der.length - 32));
}

/** The shared secret; throws on a malformed key or an all-zero result (a low-order point). */
export function x25519SharedSecret(secretKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
  if (publicKey.length !== 32) throw new Error("X25519 public key must be 32 bytes");
  const pub = createPublicKey({
    key: Buffer.concat([SPKI_PREFIX, publicKey]),
    format: "der",
    type: "spki",
  });
  return new Uint8Array(diffieHellman({ privateKey: privateKey(secretKey), publicKey: pub }));
}
