/**
 * TLS key pins: the SHA-256 of a certificate's SubjectPublicKeyInfo DER, as
 * lowercase hex. Pinning the SPKI (not the certificate) survives re-issuing a
 * certificate for the same key, which is what attestation binds.
 */
import { createHash, X509Certificate } from "node:crypto";

const PIN_RE = /^[0-9a-f]{64}$/;

/** SHA-256 (lowercase hex) of the SPKI DER of a DER-encoded X.509 certificate. */
export function spkiSha256FromCertDer(der: Uint8Array): string {
  return spkiSha256Of(new X509Certificate(der));
}

/** SHA-256 (lowercase hex) of the SPKI DER of the first certificate in a PEM string. */
export function spkiSha256FromPem(pem: string): string {
  return spkiSha256Of(new X509Certificate(pem));
}

/**
 * Validates a pin and returns it lowercased. Throws on anything that is not
 * 64 hex digits: a malformed pin must never silently match nothing (or all).
 */
export function normalizeSpkiPin(pin: string): string {
  const lower = pin.toLowerCase();
  if (!PIN_RE.test(lower)) {
    throw new TypeError("SPKI pin must be a SHA-256 digest as 64 hex characters");
  }
  return lower;
}

function spkiSha256Of(cert: X509Certificate): string {
  const spki = cert.publicKey.export({ type: "spki", format: "der" });
  return createHash("sha256").update(spki).digest("hex");
}
