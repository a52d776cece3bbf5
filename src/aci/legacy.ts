/**
 * Legacy surfaces of the dstack vllm-proxy lineage: the legacy report-data
 * layout (signing address ‖ nonce, never the ACI statement) and the
 * `/v1/signature/{id}` envelope.
 *
 * Nonce rule for the legacy layout: a nonce of exactly 64 hex characters, in
 * either case, is taken as its raw 32 bytes (older clients send uppercase
 * too); any other string contributes sha256 of its UTF-8 bytes; null (no
 * nonce) gives a fresh random value. An empty string is a nonce, not absence.
 */

import { sha256, sha256Hex } from "./digest.ts";
import { bytesToHex, hexToBytes } from "./hex.ts";
import type { Receipt } from "./receipt.ts";
import type { WorkloadKeys } from "./signer.ts";

/** The two legacy `signing_algo` values. */
export type LegacySigningAlgo = "ecdsa" | "ed25519";

/** The 32-byte nonce part of the legacy layout for a given nonce (null → random). */
export function legacyNonceBytes(
  nonce: string | null,
  randomBytes: (n: number) => Uint8Array,
): Uint8Array {
  if (nonce === null) {
    const r = randomBytes(32);
    if (r.length !== 32) throw new Error("randomBytes returned the wrong length");
    return r;
  }
  if (/^[0-9a-fA-F]{64}$/.test(nonce)) return hexToBytes(nonce);
  return sha256(nonce);
}

/**
 * The 64-byte legacy report-data slot: `[0..32)` the signing address bytes
 * right-padded with zeros (20-byte Ethereum address for ecdsa, 32-byte public
 * key for ed25519), `[32..64)` the nonce part. `nonceHex` is that nonce part
 * in lowercase hex (what the report echoes).
 */
export function legacyReportData(
  addressBytes: Uint8Array,
  nonce: string | null,
  randomBytes: (n: number) => Uint8Array,
): { slot: Uint8Array; nonceHex: string } {
  if (addressBytes.length !== 20 && addressBytes.length !== 32) {
    throw new Error("legacy address must be 20 (ecdsa) or 32 (ed25519) bytes");
  }
  const nonceBytes = legacyNonceBytes(nonce, randomBytes);
  const slot = new Uint8Array(64);
  slot.set(addressBytes);
  slot.set(nonceBytes, 32);
  return { slot, nonceHex: bytesToHex(nonceBytes) };
}

/** The legacy `signing_address` for an algorithm: EIP-55 address (ecdsa) or Ed25519 key hex. */
export function legacySigningAddress(algo: LegacySigningAlgo, keys: WorkloadKeys): string {
  return algo === "ecdsa" ? keys.ethereumAddress : keys.ed25519PublicKeyHex;
}

/** The raw address bytes that open the legacy report data for an algorithm. */
export function legacyAddressBytes(algo: LegacySigningAlgo, keys: WorkloadKeys): Uint8Array {
  return algo === "ecdsa" ? keys.ethereumAddressBytes : keys.ed25519PublicKey;
}

/** The legacy `signing_public_key`: 65-byte `04…` key (ecdsa) or 32-byte Ed25519 key, hex. */
export function legacySigningPublicKey(algo: LegacySigningAlgo, keys: WorkloadKeys): string {
  return algo === "ecdsa" ? keys.secp256k1PublicKeyHex : keys.ed25519PublicKeyHex;
}

/** The `/v1/signature/{id}` response body. */
export interface SignatureEnvelope {
  text: string;
  signature: string;
  signing_address: string;
  signing_algo: LegacySigningAlgo;
  receipt: Receipt;
}

function bareHex(hash: string): string {
  const bare = hash.startsWith("sha256:") ? hash.slice(7) : hash;
  if (!/^[0-9a-f]{64}$/.test(bare)) throw new Error("body hash must be sha256 hex");
  return bare;
}

/**
 * Wraps a receipt in the legacy envelope. `text` is
 * `"<request sha256 hex>:<response sha256 hex>"` (bare hex; the hashes may be
 * passed with or without the `sha256:` prefix). ecdsa: EIP-191 personal_sign
 * over `text`, `0x` + hex of `r‖s‖v`; ed25519: hex of the raw signature over
 * the UTF-8 text.
 */
export function signatureEnvelope(
  receipt: Receipt,
  requestBodyHash: string,
  responseBodyHash: string,
  algo: LegacySigningAlgo,
  keys: WorkloadKeys,
): SignatureEnvelope {
  const text = `${bareHex(requestBodyHash)}:${bareHex(responseBodyHash)}`;
  const signature = algo === "ecdsa"
    ? "0x" + bytesToHex(keys.signEip191(text))
    : bytesToHex(keys.signEd25519Text(text));
  return {
    text,
    signature,
    signing_address: legacySigningAddress(algo, keys),
    signing_algo: algo,
    receipt,
  };
}

/** Legacy text for raw bodies (a convenience for tests and the verifier). */
export function legacySignatureText(requestBody: Uint8Array, responseBody: Uint8Array): string {
  return `${sha256Hex(requestBody)}:${sha256Hex(responseBody)}`;
}
