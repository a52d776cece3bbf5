/**
 * SEV-SNP report verification: the VCEK chain VCEK ← ASK ← ARK (RSA-PSS
 * SHA-384) to a caller-pinned ARK, the VCEK's hwID and TCB extensions against
 * the report, and the ECDSA P-384/SHA-384 report signature (R, S stored as
 * 72-byte little-endian fields). Never throws.
 */
import "reflect-metadata";
import type { X509Certificate } from "@peculiar/x509";
import { ownBytes } from "../../aci/bytes.ts";
import { parseCertificate, verifyCertChain } from "../x509/cert_chain.ts";
import { decodeSmallUint, readTlv } from "../x509/der.ts";
import { bytesEqual } from "../../aci/hex.ts";
import { pemCertificatesToDer } from "../x509/pem.ts";
import { type Checked, errorText, fail } from "../x509/verify_result.ts";
import { parseSnpReport, type SnpProduct, type SnpReport, type SnpTcb } from "./report.ts";

export interface SnpVerifyOptions {
  /** DER of the VCEK (or VLEK) that signed the report. */
  vcekDer: Uint8Array;
  /** DER of the AMD SEV signing key (ASK) for the product. */
  askDer: Uint8Array;
  /** DER of the pinned AMD root key (ARK) for the product. */
  arkDer: Uint8Array;
  /** Clock, epoch ms. */
  now: () => number;
  /**
   * The product the ASK/ARK belong to. When given, a report whose CPUID names
   * another product, or a VCEK whose product name is another's, fails.
   */
  product?: SnpProduct;
}

export interface SnpVerified {
  report: SnpReport;
  /** POLICY bit 19: the guest owner allowed debugging. Reported, not judged. */
  debugAllowed: boolean;
  /** Earliest notAfter of VCEK, ASK and ARK, epoch ms. */
  chainNotAfterMs: number;
}

const AMD_OID = "1.3.6.1.4.1.3704.1";

/** Splits AMD's `ask_ark_<product>.pem` (ASK first, then ARK). */
export function splitAskArkPem(pem: string): Checked<{ askDer: Uint8Array; arkDer: Uint8Array }> {
  const ders = pemCertificatesToDer(pem);
  if (ders.length !== 2) return fail(`expected ASK and ARK certificates, found ${ders.length}`);
  return { ok: true, askDer: ders[0], arkDer: ders[1] };
}

function extUint(cert: X509Certificate, oid: string): number | null {
  const e = cert.getExtension(oid);
  if (!e) return null;
  const v = new Uint8Array(e.value);
  const t = readTlv(v, 0);
  return t ? decodeSmallUint(v, t) : null;
}

/**
 * Why this VCEK cannot have signed `r` (hwID ≠ CHIP_ID, or SPL extensions ≠
 * REPORTED_TCB), or null when it matches. Lets a VCEK store pick the right
 * certificate before any signature is checked.
 */
export function vcekMismatch(
  vcekDer: Uint8Array,
  r: SnpReport,
  product?: SnpProduct,
): string | null {
  const p = parseCertificate(vcekDer, "VCEK");
  return p.ok ? checkVcekMatchesReport(p.cert, r, product) : p.reason;
}

/**
 * The hwID extension's bytes: 64 (Milan, Genoa) or 8 (Turin), raw or wrapped
 * in an OCTET STRING by some encoders; null when the certificate has none (a VLEK).
 */
export function vcekHwId(vcek: X509Certificate): Uint8Array | null {
  const hw = vcek.getExtension(`${AMD_OID}.4`);
  if (!hw) return null;
  const id = new Uint8Array(hw.value);
  const t = readTlv(id, 0);
  if (id.length !== 64 && id.length !== 8 && t && t.tag === 0x04 && t.end === id.length) {
    return id.subarray(t.start, t.end);
  }
  return id;
}

/** The VCEK's product name extension (e.g. "Milan-B0", "Turin"), or null. */
function vcekProductName(vcek: X509Certificate): string | null {
  const e = vcek.getExtension(`${AMD_OID}.2`);
  if (!e) return null;
  const v = new Uint8Array(e.value);
  const t = readTlv(v, 0);
  // An IA5String; read raw bytes when it is not wrapped.
  const body = t && t.end === v.length ? v.subarray(t.start, t.end) : v;
  return new TextDecoder().decode(body);
}

const SPL_EXTENSIONS: [keyof SnpTcb, string][] = [
  ["fmc", "3.9"],
  ["bootloader", "3.1"],
  ["tee", "3.2"],
  ["snp", "3.3"],
  ["microcode", "3.8"],
];

function checkVcekMatchesReport(
  vcek: X509Certificate,
  r: SnpReport,
  product?: SnpProduct,
): string | null {
  const id = vcekHwId(vcek);
  if (id && !bytesEqual(id, r.hwId)) {
    // A Turin VCEK (8-byte hwID) against a report that does not name Turin, or the reverse.
    return id.length !== r.hwId.length
      ? `VCEK hwID is ${id.length} bytes, the report's is ${r.hwId.length} (product mismatch)`
      : "VCEK hwID does not match the report's CHIP_ID";
  }
  if (id && r.product === "Turin" && r.chipId.subarray(8).some((b) => b !== 0)) {
    return "Turin report CHIP_ID has non-zero bytes after its 8-byte hwID";
  }
  const name = vcekProductName(vcek);
  const want = product ?? r.product;
  if (name !== null && want && !name.startsWith(want)) {
    return `VCEK is for product ${name}, not ${want}`;
  }
  for (const [field, sub] of SPL_EXTENSIONS) {
    const expected = r.reportedTcb[field];
    // FMC exists only in Turin's TCB_VERSION, and Turin VCEKs always carry it.
    if (expected === undefined) continue;
    const v = extUint(vcek, `${AMD_OID}.${sub}`);
    if (v === null) return `VCEK lacks the ${field} SPL extension`;
    if (v !== expected) {
      return `VCEK ${field} SPL ${v} does not match the report's REPORTED_TCB ${
        r.reportedTcb[field]
      }`;
    }
  }
  return null;
}

/** Little-endian 72-byte scalar → big-endian 48 bytes, or null if it does not fit. */
function leScalarToBe48(le: Uint8Array): Uint8Array | null {
  for (let i = 48; i < le.length; i++) if (le[i] !== 0) return null;
  return le.slice(0, 48).reverse();
}

/** Verifies an SNP report against a VCEK chained to the pinned ARK. */
export async function verifySnpReport(
  bytes: Uint8Array,
  opts: SnpVerifyOptions,
): Promise<Checked<SnpVerified>> {
  try {
    const parsed = parseSnpReport(bytes);
    if (!parsed.ok) return parsed;
    const r = parsed.report;
    if (opts.product && r.product && r.product !== opts.product) {
      return fail(`SNP report is from a ${r.product} CPU, not ${opts.product}`);
    }
    if (r.signatureAlgo !== 1) {
      return fail(`SNP signature algorithm ${r.signatureAlgo} is not ECDSA P-384 (1)`);
    }
    const chain = await verifyCertChain({
      label: "VCEK chain",
      chain: [opts.vcekDer, opts.askDer],
      rootDer: opts.arkDer,
      rootName: "AMD ARK",
      nowMs: opts.now(),
    });
    if (!chain.ok) return chain;
    const vcek = chain.certs[0];
    const mismatch = checkVcekMatchesReport(vcek, r, opts.product);
    if (mismatch) return fail(mismatch);
    let key: CryptoKey;
    try {
      key = await crypto.subtle.importKey(
        "spki",
        vcek.publicKey.rawData,
        { name: "ECDSA", namedCurve: "P-384" },
        false,
        ["verify"],
      );
    } catch {
      return fail("VCEK key is not ECDSA P-384");
    }
    const rBe = leScalarToBe48(r.signatureR);
    const sBe = leScalarToBe48(r.signatureS);
    if (!rBe || !sBe) return fail("SNP report signature invalid: R or S exceeds 48 bytes");
    const sig = new Uint8Array(96);
    sig.set(rBe, 0);
    sig.set(sBe, 48);
    const ok = await crypto.subtle.verify(
      { name: "ECDSA", hash: "SHA-384" },
      key,
      sig,
      ownBytes(r.signedRegion),
    );
    if (!ok) return fail("SNP report signature invalid");
    return { ok: true, report: r, debugAllowed: r.debugAllowed, chainNotAfterMs: chain.notAfterMs };
  } catch (e) {
    return fail(`internal SNP verifier error: ${errorText(e)}`);
  }
}
