/**
 * The GPU's device identity: its certificate chain (exactly five
 * certificates, P-384 keys, ecdsa-with-SHA384 signatures) ending at the
 * pinned NVIDIA Device Identity CA in place of whatever root the device
 * supplied; the firmware ID its leaf certifies (Hopper: last 48 bytes of
 * extension 2.23.133.5.4.1; Blackwell: `fwids[0].digest` of the DICE
 * TcbInfo in 2.23.133.5.4.1.1); and the SPDM signature by the leaf key.
 */
import "reflect-metadata";
import type { X509Certificate } from "@peculiar/x509";
import { verifyCertChain } from "../x509/cert_chain.ts";
import { children, decodeOid, readTlv, TAG_OCTET_STRING, TAG_SEQUENCE } from "../x509/der.ts";
import { ownBytes } from "../../aci/mod.ts";
import { pemCertificatesToDer } from "../x509/pem.ts";
import { type Checked, errorText, fail } from "../x509/verify_result.ts";

/** NVIDIA's device chains are leaf, BROM, provisioner ICA, arch identity, root. */
const DEVICE_CHAIN_LENGTH = 5;
const ECDSA_SHA384 = "1.2.840.10045.4.3.3";
const P384 = "1.3.132.0.34";
const OID_HOPPER_FWID = "2.23.133.5.4.1";
const OID_DICE_TCB_INFO = "2.23.133.5.4.1.1";

export type GpuArch = "HOPPER" | "BLACKWELL";

/** A verified device chain, leaf first, ending with the pinned root. */
export interface DeviceChain {
  certs: X509Certificate[];
}

/** The CN of a certificate's subject. */
export function commonName(cert: X509Certificate): string {
  const m = /CN=([^,]+)/.exec(cert.subject);
  return m ? m[1] : cert.subject;
}

/**
 * Verifies a PEM chain as the device supplied it: its last certificate is
 * replaced by the pinned root, then length, algorithms and signatures are
 * checked at `nowMs`. Never throws.
 */
export async function verifyDeviceChain(
  pem: string,
  rootDer: Uint8Array,
  nowMs: number,
): Promise<Checked<DeviceChain>> {
  const supplied = pemCertificatesToDer(pem);
  if (supplied.length !== DEVICE_CHAIN_LENGTH) {
    return fail(
      `device chain has ${supplied.length} certificates, expected ${DEVICE_CHAIN_LENGTH}`,
    );
  }
  const chain = await verifyCertChain({
    label: "device chain",
    chain: supplied.slice(0, -1),
    rootDer,
    rootName: "NVIDIA Device Identity CA",
    nowMs,
  });
  if (!chain.ok) return chain;
  for (const cert of chain.certs) {
    if (cert.signatureAlgorithm.name !== "ECDSA" || signatureOid(cert) !== ECDSA_SHA384) {
      return fail(`device chain: "${commonName(cert)}" is not signed with ecdsa-with-SHA384`);
    }
    if (curveOid(cert) !== P384) {
      return fail(`device chain: "${commonName(cert)}" does not have a P-384 key`);
    }
  }
  return { ok: true, certs: chain.certs };
}

function signatureOid(cert: X509Certificate): string | null {
  // tbsCertificate is followed by the outer AlgorithmIdentifier.
  const raw = new Uint8Array(cert.rawData);
  const outer = readTlv(raw, 0);
  const parts = outer ? children(raw, outer) : null;
  const alg = parts?.[1] ? children(raw, parts[1]) : null;
  return alg?.[0] ? decodeOid(raw, alg[0]) : null;
}

function curveOid(cert: X509Certificate): string | null {
  const spki = new Uint8Array(cert.publicKey.rawData);
  const outer = readTlv(spki, 0);
  const parts = outer ? children(spki, outer) : null;
  const alg = parts?.[0] ? children(spki, parts[0]) : null;
  return alg?.[1] ? decodeOid(spki, alg[1]) : null;
}

function extensionValue(cert: X509Certificate, oid: string): Uint8Array | null {
  const ext = cert.extensions.find((e) => e.type === oid);
  return ext ? new Uint8Array(ext.value) : null;
}

/** The FWID the leaf certifies, by architecture; a reason when it has none. */
export function leafFwid(leaf: X509Certificate, arch: GpuArch): Checked<{ fwid: Uint8Array }> {
  if (arch === "HOPPER") {
    const v = extensionValue(leaf, OID_HOPPER_FWID);
    if (!v || v.length < 48) return fail(`leaf has no FWID extension ${OID_HOPPER_FWID}`);
    return { ok: true, fwid: v.slice(v.length - 48) };
  }
  const v = extensionValue(leaf, OID_DICE_TCB_INFO);
  if (!v) return fail(`leaf has no DICE TcbInfo extension ${OID_DICE_TCB_INFO}`);
  const seq = readTlv(v, 0);
  if (!seq || seq.tag !== TAG_SEQUENCE) return fail("DICE TcbInfo is not a SEQUENCE");
  const fields = children(v, seq) ?? [];
  const fwids = fields.find((f) => f.tag === 0xa6); // [6] IMPLICIT SEQUENCE OF FWID
  const list = fwids ? children(v, fwids) : null;
  const first = list?.[0] ? children(v, list[0]) : null;
  const digest = first?.[1];
  if (!digest || digest.tag !== TAG_OCTET_STRING) return fail("DICE TcbInfo has no fwids entry");
  return { ok: true, fwid: v.slice(digest.start, digest.end) };
}

/** ECDSA P-384 / SHA-384 over `message` with the leaf key; raw r‖s signature. */
export async function verifySpdmSignature(
  leaf: X509Certificate,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<Checked> {
  try {
    const key = await crypto.subtle.importKey(
      "spki",
      ownBytes(new Uint8Array(leaf.publicKey.rawData)),
      { name: "ECDSA", namedCurve: "P-384" },
      false,
      ["verify"],
    );
    const ok = await crypto.subtle.verify(
      { name: "ECDSA", hash: "SHA-384" },
      key,
      ownBytes(signature),
      ownBytes(message),
    );
    return ok ? { ok: true } : fail("SPDM measurement signature does not verify with the leaf key");
  } catch (e) {
    return fail(`SPDM signature check failed: ${errorText(e)}`);
  }
}
