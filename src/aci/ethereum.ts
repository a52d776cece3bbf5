/**
 * Ethereum-style secp256k1 surfaces used by the legacy (dstack vllm-proxy)
 * endpoints: address derivation with the EIP-55 checksum, and EIP-191
 * `personal_sign` signatures as 65 bytes `r‖s‖v` with `v = 27 + recovery`.
 */

import { secp256k1 } from "@noble/curves/secp256k1.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { bytesToHex } from "./hex.ts";

const encoder = new TextEncoder();

/**
 * The 65-byte uncompressed SEC1 (`04…`) form of any valid secp256k1 public
 * key encoding: SEC1 compressed (33) or uncompressed (65), or the raw 64-byte
 * `x‖y` that NEAR AI and vllm-proxy serve as `signing_public_key` (an
 * uncompressed key without its `04` tag; still checked to be on the curve).
 */
export function uncompressedPublicKey(publicKey: Uint8Array): Uint8Array {
  if (publicKey.length === 64) {
    const tagged = new Uint8Array(65);
    tagged[0] = 0x04;
    tagged.set(publicKey, 1);
    return secp256k1.Point.fromBytes(tagged).toBytes(false);
  }
  return secp256k1.Point.fromBytes(publicKey).toBytes(false);
}

/** The 20 address bytes: last 20 bytes of keccak256 of the 64-byte key without its `04` prefix. */
export function ethereumAddressBytes(publicKey: Uint8Array): Uint8Array {
  const full = uncompressedPublicKey(publicKey);
  return keccak_256(full.subarray(1)).slice(12);
}

/** EIP-55 mixed-case checksum encoding of 20 address bytes, with `0x`. */
export function toChecksumAddress(address: Uint8Array): string {
  if (address.length !== 20) throw new Error("address must be 20 bytes");
  const lower = bytesToHex(address);
  const hash = bytesToHex(keccak_256(encoder.encode(lower)));
  let out = "0x";
  for (let i = 0; i < 40; i++) {
    out += parseInt(hash[i], 16) >= 8 ? lower[i].toUpperCase() : lower[i];
  }
  return out;
}

/** EIP-55 address of a secp256k1 public key. */
export function ethereumAddress(publicKey: Uint8Array): string {
  return toChecksumAddress(ethereumAddressBytes(publicKey));
}

/** The EIP-191 `personal_sign` digest: keccak256("\x19Ethereum Signed Message:\n" + len + message). */
export function eip191Hash(text: string): Uint8Array {
  const message = encoder.encode(text);
  const prefix = encoder.encode(`\x19Ethereum Signed Message:\n${message.length}`);
  const buf = new Uint8Array(prefix.length + message.length);
  buf.set(prefix);
  buf.set(message, prefix.length);
  return keccak_256(buf);
}

/** EIP-191 signature of `text`: 65 bytes `r‖s‖v`, low-S, `v = 27 + recovery id`. */
export function signEip191(secretKey: Uint8Array, text: string): Uint8Array {
  // noble's "recovered" format puts the recovery byte first; Ethereum wants it last.
  const rec = secp256k1.sign(eip191Hash(text), secretKey, { prehash: false, format: "recovered" });
  const out = new Uint8Array(65);
  out.set(rec.subarray(1, 65));
  out[64] = 27 + rec[0];
  return out;
}

/**
 * The uncompressed public key that produced an EIP-191 signature of `text`.
 * Accepts `v` as 27/28 or 0/1; throws on any other shape.
 */
function recoverEip191PublicKey(text: string, signature: Uint8Array): Uint8Array {
  if (signature.length !== 65) throw new Error("signature must be 65 bytes");
  const v = signature[64];
  const recovery = v >= 27 ? v - 27 : v;
  if (recovery !== 0 && recovery !== 1) throw new Error("invalid recovery byte");
  const rec = new Uint8Array(65);
  rec[0] = recovery;
  rec.set(signature.subarray(0, 64), 1);
  const pub = secp256k1.recoverPublicKey(rec, eip191Hash(text), { prehash: false });
  return uncompressedPublicKey(pub);
}

/** EIP-55 address recovered from an EIP-191 signature of `text`. */
export function recoverEip191Address(text: string, signature: Uint8Array): string {
  return ethereumAddress(recoverEip191PublicKey(text, signature));
}
