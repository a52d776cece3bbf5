/**
 * The workload keyset: every public key the attested workload uses, bound to
 * the TEE quote through its digest. Any change to it gives a new digest and
 * therefore needs a new quote.
 */

import { sha256Prefixed } from "./digest.ts";
import { jcsBytes } from "./jcs.ts";

/**
 * A receipt-signing key entry. `algo` is "ed25519" (the baseline receipt
 * algorithm) or "secp256k1" (listed for the legacy ecdsa endpoints; verifiers
 * that do not know it ignore it, while the digest still covers it).
 */
export interface ReceiptSigningKey {
  key_id: string;
  algo: string;
  /** Lowercase hex: 32 bytes for ed25519, the 65-byte `04…` SEC1 key for secp256k1. */
  public_key: string;
}

/** An end-to-end encryption public key the workload accepts. */
export interface E2eePublicKey {
  key_id: string;
  algo: string;
  public_key: string;
}

/** A TLS key clients should pin: SHA-256 of its SPKI DER, lowercase hex. */
export interface TlsPublicKey {
  spki_sha256: string;
  domain?: string;
}

/** The keyset object served inside the attestation report. */
export interface WorkloadKeyset {
  subject: string | null;
  /** Unix seconds after which the keyset must not be trusted. */
  not_after: number;
  receipt_signing_keys: ReceiptSigningKey[];
  e2ee_public_keys: E2eePublicKey[];
  tls_public_keys: TlsPublicKey[];
}

/** `"sha256:" + hex(sha256(JCS(keyset)))`: the `workload_keyset_digest`. */
export function keysetDigest(keyset: WorkloadKeyset): string {
  return sha256Prefixed(jcsBytes(keyset));
}
