/**
 * Certificate revocation lists: signature by the expected issuer, validity
 * window at `now`, and lookups of revoked serials.
 */
import "reflect-metadata";
import { X509Certificate, X509Crl } from "@peculiar/x509";
import { ownBytes } from "../../aci/bytes.ts";
import { type Checked, errorText, fail } from "./verify_result.ts";

/** A CRL that has been checked against its issuer at some instant. */
export interface VerifiedCrl {
  crl: X509Crl;
  /** Epoch ms of the CRL's nextUpdate (null when the CRL has none). */
  nextUpdateMs: number | null;
}

/** Parses a DER CRL, or explains why it does not parse. */
function parseCrl(der: Uint8Array, label: string): Checked<{ crl: X509Crl }> {
  try {
    return { ok: true, crl: new X509Crl(ownBytes(der)) };
  } catch (e) {
    return fail(`${label} does not parse: ${errorText(e)}`);
  }
}

/**
 * Checks that `issuer` signed the CRL (names and signature) and that it is
 * current at `nowMs` (thisUpdate ≤ now ≤ nextUpdate).
 */
export async function verifyCrl(
  der: Uint8Array,
  issuer: X509Certificate,
  nowMs: number,
  label: string,
): Promise<Checked<VerifiedCrl>> {
  const parsed = parseCrl(der, label);
  if (!parsed.ok) return parsed;
  const crl = parsed.crl;
  if (crl.issuer !== issuer.subject) {
    return fail(`${label} issuer "${crl.issuer}" is not "${issuer.subject}"`);
  }
  let sigOk = false;
  try {
    sigOk = await crl.verify({ publicKey: issuer });
  } catch (e) {
    return fail(`${label} signature check failed: ${errorText(e)}`);
  }
  if (!sigOk) return fail(`${label} signature invalid`);
  if (crl.thisUpdate.getTime() > nowMs) {
    return fail(`${label} not yet valid: thisUpdate ${crl.thisUpdate.toISOString()}`);
  }
  const next = crl.nextUpdate?.getTime() ?? null;
  if (next !== null && next < nowMs) {
    return fail(`${label} expired: nextUpdate ${new Date(next).toISOString()}`);
  }
  return { ok: true, crl, nextUpdateMs: next };
}

/** True when the CRL lists the certificate's serial (and the CRL is the cert's issuer's). */
export function isRevoked(crl: X509Crl, cert: X509Certificate): boolean {
  if (crl.issuer !== cert.issuer) return false;
  return crl.findRevoked(cert) !== null;
}
