/**
 * Full DCAP verification of a TDX quote, in the order of attestation.md §2:
 * header; PCK chain to the pinned root with CRLs; QE report signature and
 * binding; quote signature; signed collateral (TCB Info, QE Identity) and its
 * dates and FMSPC; QE identity policy; TCB level; TD policy. Never throws.
 */
import "reflect-metadata";
import type { X509Certificate, X509Crl } from "@peculiar/x509";
import { isRevoked, verifyCrl } from "../x509/crl.ts";
import { parseCertificate, verifyCertChain } from "../x509/cert_chain.ts";
import { bytesEqual } from "../../aci/hex.ts";
import { concatBytes } from "../../aci/bytes.ts";
import { sha256 } from "../../aci/digest.ts";
import { pemCertificatesToDer } from "../x509/pem.ts";
import { errorText } from "../x509/verify_result.ts";
import type { TdxCollateral } from "./collateral.ts";
import { INTEL_SGX_ROOT_CA_DER } from "./intel_root.ts";
import { importP256FromCert, importP256Raw, verifyP256 } from "./p256.ts";
import { parsePckExtension } from "./pck_extension.ts";
import {
  ATTESTATION_KEY_ECDSA_P256,
  INTEL_QE_VENDOR_ID,
  parseTdxQuote,
  type TdReport,
  type TdReportHex,
  tdReportToHex,
  type TdxQuote,
  TEE_TYPE_TDX,
} from "./quote.ts";
import { checkTdPolicy, type TdPolicyResult } from "./td_policy.ts";
import { checkQeIdentity, matchTdxTcb, type TcbStatus } from "./tcb_level.ts";
import { tcbPolicyViolation, type TdxTcbPolicy } from "./tcb_policy.ts";
import { isoToMs, parseQeIdentity, parseTcbInfo } from "./tcb_info.ts";

/** Where verification stopped. */
export type TdxVerifyStage =
  | "parse"
  | "header"
  | "pck_chain"
  | "qe_report"
  | "quote_signature"
  | "collateral"
  | "qe_identity"
  | "tcb"
  | "td_policy";

export interface TdxVerifyOptions {
  collateral: TdxCollateral;
  /** Clock, epoch milliseconds; read once. */
  now: () => number;
  /** DER of the pinned root. Default: the real Intel SGX Root CA. */
  rootCaDer?: Uint8Array;
  /** "enforce" (default) fails on a TD policy violation; "report" only reports it. */
  tdPolicy?: "enforce" | "report";
  /**
   * Accept a TD whose SEPT_VE_DISABLE attribute is 0 (Azure TDX VMs, which run
   * under TD partitioning); DEBUG = 1 still fails. Default false.
   */
  allowSeptVeEnabled?: boolean;
  /** Accepted TCB statuses; default `DEFAULT_ACCEPTED_TCB_STATUSES`. NotSupported and Revoked always fail. */
  tcbPolicy?: TdxTcbPolicy;
}

/** A verified quote. */
export interface TdxVerified {
  ok: true;
  version: 4 | 5;
  teeType: "tdx";
  /** A status the TCB policy accepts (never `NotSupported` or `Revoked`); `UpToDate` is the only fully current one. */
  tcbStatus: TcbStatus;
  advisoryIds: string[];
  /** Lowercase hex, from the PCK certificate. */
  fmspc: string;
  report: TdReport;
  reportHex: TdReportHex;
  /** Epoch seconds of the earliest nextUpdate among TCB Info, QE Identity and the CRLs. */
  collateralExpiresAt: number;
  /** `TDX_%02X` module identity used, or null (module major version 0). */
  tdxModuleId: string | null;
  tdPolicy: TdPolicyResult;
}

export interface TdxVerifyFailure {
  ok: false;
  stage: TdxVerifyStage;
  reason: string;
}

export type TdxVerifyResult = TdxVerified | TdxVerifyFailure;

const ROOT_NAME = "Intel SGX Root CA";

function failAt(stage: TdxVerifyStage, reason: string): TdxVerifyFailure {
  return { ok: false, stage, reason };
}

/** Step 4 alone: the attestation key's signature over header and body. */
export async function verifyQuoteSignature(q: TdxQuote): Promise<boolean> {
  const key = await importP256Raw(q.attestationKey);
  return key !== null && await verifyP256(key, q.signature, q.signedRegion);
}

/** Step 3 binding: `qe_report.report_data = sha256(attestation_key ‖ qe_auth_data) ‖ 32 zero bytes`. */
export function qeReportBindsAttestationKey(q: TdxQuote): boolean {
  const h = sha256(concatBytes([q.attestationKey, q.qeAuthData]));
  const rd = q.qeReport.reportData;
  return bytesEqual(rd.subarray(0, 32), h) && rd.subarray(32).every((b) => b === 0);
}

function checkHeader(q: TdxQuote): string | null {
  if (q.attestationKeyType !== ATTESTATION_KEY_ECDSA_P256) {
    return `attestation key type ${q.attestationKeyType} is not ECDSA P-256 (2)`;
  }
  if (q.teeType !== TEE_TYPE_TDX) return `TEE type 0x${q.teeType.toString(16)} is not TDX (0x81)`;
  if (q.qeVendorId !== INTEL_QE_VENDOR_ID) return `QE vendor id ${q.qeVendorId} is not Intel's`;
  return null;
}

function revokedIn(crls: X509Crl[], certs: X509Certificate[]): X509Certificate | null {
  for (const crl of crls) for (const c of certs) if (isRevoked(crl, c)) return c;
  return null;
}

async function verifySignedDoc(
  label: string,
  chainPem: string,
  raw: string,
  sig: Uint8Array,
  rootDer: Uint8Array,
  nowMs: number,
  crls: X509Crl[],
): Promise<string | null> {
  const chain = await verifyCertChain({
    label: `${label} signing chain`,
    chain: pemCertificatesToDer(chainPem),
    rootDer,
    rootName: ROOT_NAME,
    nowMs,
    crls,
  });
  if (!chain.ok) return chain.reason;
  const key = await importP256FromCert(chain.certs[0]);
  if (!key) return `${label} signing certificate key is not P-256`;
  if (!(await verifyP256(key, sig, new TextEncoder().encode(raw)))) {
    return `${label} signature invalid`;
  }
  return null;
}

function checkWindow(
  label: string,
  issueIso: string,
  nextIso: string,
  nowMs: number,
): string | number {
  const issue = isoToMs(issueIso);
  const next = isoToMs(nextIso);
  if (issue === null || next === null) return `${label} dates do not parse`;
  if (nowMs < issue) return `collateral not yet valid: ${label} issueDate ${issueIso}`;
  if (nowMs > next) return `collateral expired: ${label} nextUpdate ${nextIso}`;
  return next;
}

/** Verifies a TDX quote against collateral and a pinned root; never throws. */
export async function verifyTdxQuote(
  quoteBytes: Uint8Array,
  opts: TdxVerifyOptions,
): Promise<TdxVerifyResult> {
  try {
    return await verifyInner(quoteBytes, opts);
  } catch (e) {
    return failAt("parse", `internal verifier error: ${errorText(e)}`);
  }
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function verifyInner(
  quoteBytes: Uint8Array,
  opts: TdxVerifyOptions,
): Promise<TdxVerifyResult> {
  const nowMs = opts.now();
  const rootDer = opts.rootCaDer ?? INTEL_SGX_ROOT_CA_DER;
  const col = opts.collateral;

  const parsed = parseTdxQuote(quoteBytes);
  if (!parsed.ok) return failAt("parse", parsed.reason);
  const q = parsed.quote;

  // 1. Header.
  const headerIssue = checkHeader(q);
  if (headerIssue) return failAt("header", headerIssue);

  // 2. PCK chain to the pinned root, then the CRLs that cover it.
  const chain = await verifyCertChain({
    label: "PCK chain",
    chain: q.pckChainDer,
    rootDer,
    rootName: ROOT_NAME,
    nowMs,
  });
  if (!chain.ok) return failAt("pck_chain", chain.reason);
  if (chain.certs.length !== 3) {
    return failAt("pck_chain", `PCK chain has ${chain.certs.length} certificates, expected 3`);
  }
  const [leaf, pckCa, root] = chain.certs;
  const rootCrl = await verifyCrl(col.rootCaCrl, root, nowMs, "root CA CRL");
  if (!rootCrl.ok) return failAt("pck_chain", rootCrl.reason);
  const pckCrl = await verifyCrl(col.pckCrl, pckCa, nowMs, "PCK CRL");
  if (!pckCrl.ok) return failAt("pck_chain", pckCrl.reason);
  const crls = [rootCrl.crl, pckCrl.crl];
  const revoked = revokedIn(crls, chain.certs);
  if (revoked) return failAt("pck_chain", `PCK chain: certificate "${revoked.subject}" is revoked`);

  // 3. QE report: signed by the PCK leaf, and binding the attestation key.
  const pckKey = await importP256FromCert(leaf);
  if (!pckKey) return failAt("qe_report", "PCK leaf key is not P-256");
  if (!(await verifyP256(pckKey, q.qeReportSignature, q.qeReport.raw))) {
    return failAt("qe_report", "QE report signature invalid");
  }
  if (!qeReportBindsAttestationKey(q)) {
    return failAt("qe_report", "QE report data does not bind the attestation key and QE auth data");
  }

  // 4. Quote signature.
  if (!(await verifyQuoteSignature(q))) return failAt("quote_signature", "quote signature invalid");

  // 5. Collateral: signatures over the served bytes, dates, FMSPC.
  const tcbSigIssue = await verifySignedDoc(
    "TCB Info",
    col.tcbInfoIssuerChain,
    col.tcbInfo,
    col.tcbInfoSignature,
    rootDer,
    nowMs,
    [rootCrl.crl],
  );
  if (tcbSigIssue) return failAt("collateral", tcbSigIssue);
  const qeSigIssue = await verifySignedDoc(
    "QE Identity",
    col.qeIdentityIssuerChain,
    col.qeIdentity,
    col.qeIdentitySignature,
    rootDer,
    nowMs,
    [rootCrl.crl],
  );
  if (qeSigIssue) return failAt("collateral", qeSigIssue);
  const tcbInfo = parseTcbInfo(col.tcbInfo);
  if (!tcbInfo.ok) return failAt("collateral", tcbInfo.reason);
  const qeIdentity = parseQeIdentity(col.qeIdentity);
  if (!qeIdentity.ok) return failAt("collateral", qeIdentity.reason);
  const ti = tcbInfo.tcbInfo;
  const qi = qeIdentity.qeIdentity;
  const tcbNext = checkWindow("tcbInfo", ti.issueDate, ti.nextUpdate, nowMs);
  if (typeof tcbNext === "string") return failAt("collateral", tcbNext);
  const qeNext = checkWindow("qeIdentity", qi.issueDate, qi.nextUpdate, nowMs);
  if (typeof qeNext === "string") return failAt("collateral", qeNext);
  const ext = parsePckExtension(leaf);
  if (!ext.ok) return failAt("collateral", ext.reason);
  const pck = ext.ext;
  if (pck.fmspc !== ti.fmspc.toLowerCase()) {
    return failAt(
      "collateral",
      `FMSPC mismatch: PCK certificate ${pck.fmspc}, TCB Info ${ti.fmspc.toLowerCase()}`,
    );
  }
  if (pck.pceId !== ti.pceId.toLowerCase()) {
    return failAt(
      "collateral",
      `PCE-ID mismatch: PCK certificate ${pck.pceId}, TCB Info ${ti.pceId.toLowerCase()}`,
    );
  }

  // 6. QE identity policy.
  const qe = checkQeIdentity(q.qeReport, qi);
  if (!qe.ok) return failAt("qe_identity", qe.reason);

  // 7. TCB level.
  const tcb = matchTdxTcb(ti, pck, q.report, qe.qeTcb);
  if (!tcb.ok) return failAt("tcb", tcb.reason);
  const violation = tcbPolicyViolation(tcb.tcb, opts.tcbPolicy);
  if (violation) return failAt("tcb", violation);

  // 8. TD policy.
  const tdPolicy = checkTdPolicy(q.report, { allowSeptVeEnabled: opts.allowSeptVeEnabled });
  if (!tdPolicy.ok && (opts.tdPolicy ?? "enforce") === "enforce") {
    return failAt("td_policy", tdPolicy.reason ?? "TD policy violated");
  }

  const expiries = [tcbNext, qeNext, rootCrl.nextUpdateMs, pckCrl.nextUpdateMs].filter(
    (x): x is number => x !== null,
  );
  return {
    ok: true,
    version: q.version,
    teeType: "tdx",
    tcbStatus: tcb.tcb.tcbStatus,
    advisoryIds: tcb.tcb.advisoryIds,
    fmspc: pck.fmspc,
    report: q.report,
    reportHex: tdReportToHex(q.report),
    collateralExpiresAt: Math.floor(Math.min(...expiries) / 1000),
    tdxModuleId: tcb.tcb.tdxModuleId,
    tdPolicy,
  };
}

/** FMSPC and PCK CA kind of a quote's (unverified) PCK leaf: used to pick collateral before verifying. */
export function quoteCollateralKey(
  quoteBytes: Uint8Array,
): { ok: true; fmspc: string; ca: "platform" | "processor" } | { ok: false; reason: string } {
  const parsed = parseTdxQuote(quoteBytes);
  if (!parsed.ok) return parsed;
  const [leafDer, caDer] = parsed.quote.pckChainDer;
  const leaf = parseCertificate(leafDer, "PCK leaf");
  if (!leaf.ok) return leaf;
  const ext = parsePckExtension(leaf.cert);
  if (!ext.ok) return ext;
  let ca: "platform" | "processor" = "platform";
  if (caDer) {
    const c = parseCertificate(caDer, "PCK CA");
    if (c.ok && /Processor/i.test(c.cert.subject)) ca = "processor";
  }
  return { ok: true, fmspc: ext.ext.fmspc, ca };
}
