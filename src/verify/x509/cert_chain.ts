/**
 * Certificate chain verification to a caller-pinned root: names, signatures,
 * CA constraints, validity at `now` and revocation by already-verified CRLs.
 * Used for the Intel PCK and TCB-signing chains and for AMD's VCEK chain.
 */
import "reflect-metadata";
import { BasicConstraintsExtension, X509Certificate, type X509Crl } from "@peculiar/x509";
import { ownBytes } from "../../aci/bytes.ts";
import { bytesEqual } from "../../aci/hex.ts";
import { isRevoked } from "./crl.ts";
import { type Checked, errorText, fail } from "./verify_result.ts";

/** What to verify. */
export interface ChainInput {
  /** Used as the reason prefix, e.g. "PCK chain". */
  label: string;
  /** DER certificates, leaf first; the root may or may not be included at the end. */
  chain: Uint8Array[];
  /** DER of the pinned root certificate. */
  rootDer: Uint8Array;
  /** Human name of the pinned root for reasons, e.g. "Intel SGX Root CA". */
  rootName: string;
  nowMs: number;
  /** CRLs whose signatures and dates the caller has already checked. */
  crls?: X509Crl[];
}

/** A verified chain: certificates leaf first, ending with the pinned root. */
export interface VerifiedChain {
  certs: X509Certificate[];
  /** Earliest notAfter in the chain, epoch ms. */
  notAfterMs: number;
}

/** Parses DER into a certificate or explains why not. */
export function parseCertificate(
  der: Uint8Array,
  what: string,
): Checked<{ cert: X509Certificate }> {
  try {
    return { ok: true, cert: new X509Certificate(ownBytes(der)) };
  } catch (e) {
    return fail(`${what} does not parse: ${errorText(e)}`);
  }
}

function cnOf(cert: X509Certificate): string {
  const m = /CN=([^,]+)/.exec(cert.subject);
  return m ? m[1] : cert.subject;
}

function isCa(cert: X509Certificate): boolean {
  const bc = cert.getExtension(BasicConstraintsExtension);
  return bc !== null && bc.ca;
}

async function signedBy(cert: X509Certificate, issuer: X509Certificate): Promise<boolean> {
  if (cert.issuer !== issuer.subject) return false;
  try {
    return await cert.verify({ publicKey: issuer, signatureOnly: true });
  } catch {
    return false;
  }
}

/** Verifies the chain; never throws. */
export async function verifyCertChain(input: ChainInput): Promise<Checked<VerifiedChain>> {
  const { label, rootName, nowMs } = input;
  const rootParsed = parseCertificate(input.rootDer, `${label}: pinned ${rootName}`);
  if (!rootParsed.ok) return rootParsed;
  const root = rootParsed.cert;
  if (input.chain.length === 0) return fail(`${label} is empty`);

  let ders = input.chain;
  if (bytesEqual(ders[ders.length - 1], input.rootDer)) ders = ders.slice(0, -1);
  if (ders.length === 0) return fail(`${label} holds only the root certificate`);
  const certs: X509Certificate[] = [];
  for (let i = 0; i < ders.length; i++) {
    const p = parseCertificate(ders[i], `${label}: certificate ${i}`);
    if (!p.ok) return p;
    certs.push(p.cert);
  }
  const path = [...certs, root];

  for (let i = 0; i < certs.length; i++) {
    const cert = certs[i];
    const issuer = path[i + 1];
    if (!(await signedBy(cert, issuer))) {
      if (i === certs.length - 1) return fail(`${label} does not reach the pinned ${rootName}`);
      return fail(`${label}: "${cnOf(cert)}" is not signed by "${cnOf(issuer)}"`);
    }
    if (!isCa(issuer)) return fail(`${label}: issuer "${cnOf(issuer)}" is not a CA`);
  }
  if (!(await signedBy(root, root))) return fail(`${label}: pinned ${rootName} is not self-signed`);

  let notAfterMs = Infinity;
  for (const cert of path) {
    if (cert.notBefore.getTime() > nowMs) {
      return fail(
        `${label}: certificate "${
          cnOf(cert)
        }" not yet valid (notBefore ${cert.notBefore.toISOString()})`,
      );
    }
    if (cert.notAfter.getTime() < nowMs) {
      return fail(
        `${label}: certificate "${cnOf(cert)}" expired (notAfter ${cert.notAfter.toISOString()})`,
      );
    }
    notAfterMs = Math.min(notAfterMs, cert.notAfter.getTime());
  }

  for (const crl of input.crls ?? []) {
    for (const cert of path) {
      if (isRevoked(crl, cert)) {
        return fail(`${label}: certificate "${cnOf(cert)}" serial ${cert.serialNumber} is revoked`);
      }
    }
  }
  return { ok: true, certs: path, notAfterMs };
}
