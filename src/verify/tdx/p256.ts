/**
 * Raw ECDSA P-256/SHA-256 checks as DCAP encodes them: signatures are r‖s
 * (64 bytes) and the attestation key is x‖y (64 bytes). WebCrypto verifies
 * r‖s directly, so no DER conversion is needed.
 */
import "reflect-metadata";
import type { X509Certificate } from "@peculiar/x509";
import { concatBytes, ownBytes } from "../../aci/bytes.ts";

const ALG = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIG = { name: "ECDSA", hash: "SHA-256" } as const;

/** Imports an x‖y P-256 public key; null if it is not a point on the curve. */
export async function importP256Raw(xy: Uint8Array): Promise<CryptoKey | null> {
  if (xy.length !== 64) return null;
  try {
    const raw = concatBytes([Uint8Array.of(4), xy]);
    return await crypto.subtle.importKey("raw", raw, ALG, false, ["verify"]);
  } catch {
    return null;
  }
}

/** Imports a certificate's P-256 public key; null if it is not P-256. */
export async function importP256FromCert(cert: X509Certificate): Promise<CryptoKey | null> {
  try {
    return await crypto.subtle.importKey("spki", cert.publicKey.rawData, ALG, false, ["verify"]);
  } catch {
    return null;
  }
}

/** Verifies a raw r‖s signature; false on any malformed input. */
export async function verifyP256(
  key: CryptoKey,
  sig: Uint8Array,
  data: Uint8Array,
): Promise<boolean> {
  if (sig.length !== 64) return false;
  try {
    return await crypto.subtle.verify(SIG, key, ownBytes(sig), ownBytes(data));
  } catch {
    return false;
  }
}
