/**
 * The ACI attestation statement and the TEE report-data it becomes:
 * `report_data = sha256(statement)`, placed in bytes 0..31 of the 64-byte
 * report-data slot (bytes 32..63 zero). The statement is built through JCS,
 * which for these three ASCII members is exactly the documented bytes.
 */

import { PREFIXED_DIGEST_RE, sha256 } from "./digest.ts";
import { jcs } from "./jcs.ts";

/** The statement's `purpose` member. */
const STATEMENT_PURPOSE = "aci.report_data.v1";

const NONCE_RE = /^[0-9a-f]{64}$/;

/**
 * The exact statement string, e.g.
 * `{"keyset_digest":"sha256:<hex>","nonce":"<64 hex>"|null,"purpose":"aci.report_data.v1"}`.
 * Throws on a malformed digest or nonce (callers validate client nonces with
 * `parseAciNonce` in src/handlers/aci_nonce.ts first).
 */
export function attestationStatement(keysetDigest: string, nonce: string | null): string {
  if (!PREFIXED_DIGEST_RE.test(keysetDigest)) throw new Error("malformed keyset digest");
  if (nonce !== null && !NONCE_RE.test(nonce)) throw new Error("malformed nonce");
  return jcs({ keyset_digest: keysetDigest, nonce, purpose: STATEMENT_PURPOSE });
}

/** `sha256(statement)`: the 32-byte ACI report data. */
export function reportData(keysetDigest: string, nonce: string | null): Uint8Array {
  return sha256(attestationStatement(keysetDigest, nonce));
}

/** The 64-byte TEE report-data slot: the 32-byte report data then 32 zero bytes. */
export function reportDataSlot(rd32: Uint8Array): Uint8Array {
  if (rd32.length !== 32) throw new Error("report data must be 32 bytes");
  const slot = new Uint8Array(64);
  slot.set(rd32);
  return slot;
}
