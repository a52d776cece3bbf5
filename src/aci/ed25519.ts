/**
 * Ed25519 through node:crypto's native implementation (signing a receipt
 * costs tens of microseconds, far below noble's pure-JS path). Raw 32-byte
 * keys are wrapped in fixed DER prefixes because node:crypto only imports
 * keys as PKCS#8 / SPKI.
 */

import { concatBytes } from "./bytes.ts";
import { Buffer } from "node:buffer";
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
  verify,
} from "node:crypto";

// RFC 8410 encodings: the key bytes are the last 32 bytes of each structure.
const PKCS8_PREFIX = Uint8Array.from([
  0x30,
  0x2e,
  0x02,
  0x01,
  0x00,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x70,
  0x04,
  0x22,
  0x04,
  0x20,
]);
const SPKI_PREFIX = Uint8Array.from([
  0x30,
  0x2a,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x70,
  0x03,
  0x21,
  0x00,
]);

/** A private key object from a 32-byte RFC 8032 seed. */
export function ed25519PrivateKeyFromSeed(seed: Uint8Array): KeyObject {
  if (seed.length !== 32) throw new Error("ed25519 seed must be 32 bytes");
  return createPrivateKey({
    key: Buffer.from(concatBytes([PKCS8_PREFIX, seed])),
    format: "der",
    type: "pkcs8",
  });
}

/** A public key object from the raw 32-byte public key. */
function ed25519PublicKeyFromRaw(raw: Uint8Array): KeyObject {
  if (raw.length !== 32) throw new Error("ed25519 public key must be 32 bytes");
  return createPublicKey({
    key: Buffer.from(concatBytes([SPKI_PREFIX, raw])),
    format: "der",
    type: "spki",
  });
}

/** The raw 32-byte public key of a (private or public) Ed25519 key object. */
export function ed25519RawPublicKey(key: KeyObject): Uint8Array {
  const pub = key.type === "private" ? createPublicKey(key) : key;
  const der = new Uint8Array(pub.export({ format: "der", type: "spki" }));
  return der.slice(der.length - 32);
}

/** A fresh random Ed25519 private key. */
export function generateEd25519PrivateKey(): KeyObject {
  return generateKeyPairSync("ed25519").privateKey;
}

/** 64-byte Ed25519 signature of `message`. */
export function ed25519Sign(privateKey: KeyObject, message: Uint8Array): Uint8Array {
  return new Uint8Array(sign(null, message, privateKey));
}

/** Whether `signature` is a valid Ed25519 signature of `message` under the raw public key. */
export function ed25519Verify(
  publicKey: Uint8Array,
  signature: Uint8Array,
  message: Uint8Array,
): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  try {
    return verify(null, message, ed25519PublicKeyFromRaw(publicKey), signature);
  } catch {
    // A point that does not decode is a failed verification, not a crash.
    return false;
  }
}
