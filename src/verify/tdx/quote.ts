/**
 * Intel TDX quote parser (DCAP quote v4, and v5 with TD 1.0 / TD 1.5 bodies).
 * Parsing is purely structural: it finds the TD report, the signed region and
 * the certification data by the declared lengths (quotes carry zero padding)
 * and leaves every trust decision to `dcap.ts`.
 */
import { bytesToHex } from "../../aci/hex.ts";
import { pemCertificatesToDer } from "../x509/pem.ts";
import { type Checked, fail } from "../x509/verify_result.ts";

/** TD report fields (TDREPORT body). TD 1.5 adds `teeTcbSvn2` and `mrServiceTd`. */
export interface TdReport {
  teeTcbSvn: Uint8Array;
  mrSeam: Uint8Array;
  mrSignerSeam: Uint8Array;
  seamAttributes: Uint8Array;
  /** 8 bytes little-endian; bit 0 DEBUG, bit 28 SEPT_VE_DISABLE. */
  tdAttributes: Uint8Array;
  xfam: Uint8Array;
  mrTd: Uint8Array;
  mrConfigId: Uint8Array;
  mrOwner: Uint8Array;
  mrOwnerConfig: Uint8Array;
  /** RTMR0..RTMR3, 48 bytes each. */
  rtmrs: [Uint8Array, Uint8Array, Uint8Array, Uint8Array];
  reportData: Uint8Array;
  teeTcbSvn2?: Uint8Array;
  mrServiceTd?: Uint8Array;
}

/** The same report as lowercase hex strings (for claims and logs of measurements). */
export interface TdReportHex {
  teeTcbSvn: string;
  mrSeam: string;
  mrSignerSeam: string;
  seamAttributes: string;
  tdAttributes: string;
  xfam: string;
  mrTd: string;
  mrConfigId: string;
  mrOwner: string;
  mrOwnerConfig: string;
  rtmr0: string;
  rtmr1: string;
  rtmr2: string;
  rtmr3: string;
  reportData: string;
  teeTcbSvn2?: string;
  mrServiceTd?: string;
}

/** The Quoting Enclave's SGX report (384 bytes). */
export interface QeReport {
  raw: Uint8Array;
  cpuSvn: Uint8Array;
  miscSelect: number;
  attributes: Uint8Array;
  mrEnclave: Uint8Array;
  mrSigner: Uint8Array;
  isvProdId: number;
  isvSvn: number;
  reportData: Uint8Array;
}

/** A structurally parsed TDX quote. Byte fields are views into the input. */
export interface TdxQuote {
  version: 4 | 5;
  attestationKeyType: number;
  teeType: number;
  qeVendorId: string;
  /** 2 = TD 1.0 report body, 3 = TD 1.5 (v4 quotes are always 2). */
  bodyType: 2 | 3;
  report: TdReport;
  /** The bytes the attestation key signed: header and body. */
  signedRegion: Uint8Array;
  /** Raw r‖s, 64 bytes. */
  signature: Uint8Array;
  /** Raw x‖y of the P-256 attestation key, 64 bytes. */
  attestationKey: Uint8Array;
  qeReport: QeReport;
  /** Raw r‖s of the PCK signature over the QE report. */
  qeReportSignature: Uint8Array;
  qeAuthData: Uint8Array;
  /** PCK leaf → intermediate → root, as PEM text blocks and DER. */
  pckChainPem: string[];
  pckChainDer: Uint8Array[];
}

export const TEE_TYPE_TDX = 0x81;
export const ATTESTATION_KEY_ECDSA_P256 = 2;
export const INTEL_QE_VENDOR_ID = "939a7233f79c4ca9940a0db3957f0607";

const HEADER_LEN = 48;
const TD10_BODY_LEN = 584;
const TD15_BODY_LEN = 648;
const QE_REPORT_LEN = 384;
const CERT_DATA_QE_REPORT = 6;
const CERT_DATA_PCK_CHAIN = 5;

function parseTdReport(b: Uint8Array, withTd15: boolean): TdReport {
  const at = (o: number, n: number) => b.subarray(o, o + n);
  const report: TdReport = {
    teeTcbSvn: at(0, 16),
    mrSeam: at(16, 48),
    mrSignerSeam: at(64, 48),
    seamAttributes: at(112, 8),
    tdAttributes: at(120, 8),
    xfam: at(128, 8),
    mrTd: at(136, 48),
    mrConfigId: at(184, 48),
    mrOwner: at(232, 48),
    mrOwnerConfig: at(280, 48),
    rtmrs: [at(328, 48), at(376, 48), at(424, 48), at(472, 48)],
    reportData: at(520, 64),
  };
  if (withTd15) {
    report.teeTcbSvn2 = at(584, 16);
    report.mrServiceTd = at(600, 48);
  }
  return report;
}

/** Parses the 384-byte SGX enclave report the QE produces. */
function parseQeReport(raw: Uint8Array): QeReport {
  const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  return {
    raw,
    cpuSvn: raw.subarray(0, 16),
    miscSelect: dv.getUint32(16, true),
    attributes: raw.subarray(48, 64),
    mrEnclave: raw.subarray(64, 96),
    mrSigner: raw.subarray(128, 160),
    isvProdId: dv.getUint16(256, true),
    isvSvn: dv.getUint16(258, true),
    reportData: raw.subarray(320, 384),
  };
}

/** Lowercase-hex view of a TD report. */
export function tdReportToHex(r: TdReport): TdReportHex {
  const out: TdReportHex = {
    teeTcbSvn: bytesToHex(r.teeTcbSvn),
    mrSeam: bytesToHex(r.mrSeam),
    mrSignerSeam: bytesToHex(r.mrSignerSeam),
    seamAttributes: bytesToHex(r.seamAttributes),
    tdAttributes: bytesToHex(r.tdAttributes),
    xfam: bytesToHex(r.xfam),
    mrTd: bytesToHex(r.mrTd),
    mrConfigId: bytesToHex(r.mrConfigId),
    mrOwner: bytesToHex(r.mrOwner),
    mrOwnerConfig: bytesToHex(r.mrOwnerConfig),
    rtmr0: bytesToHex(r.rtmrs[0]),
    rtmr1: bytesToHex(r.rtmrs[1]),
    rtmr2: bytesToHex(r.rtmrs[2]),
    rtmr3: bytesToHex(r.rtmrs[3]),
    reportData: bytesToHex(r.reportData),
  };
  if (r.teeTcbSvn2) out.teeTcbSvn2 = bytesToHex(r.teeTcbSvn2);
  if (r.mrServiceTd) out.mrServiceTd = bytesToHex(r.mrServiceTd);
  return out;
}

/** Parses a TDX quote v4/v5; never throws. */
// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
export function parseTdxQuote(quote: Uint8Array): Checked<{ quote: TdxQuote }> {
  if (quote.length < HEADER_LEN + 6) return fail(`quote too short: ${quote.length} bytes`);
  const dv = new DataView(quote.buffer, quote.byteOffset, quote.byteLength);
  const version = dv.getUint16(0, true);
  if (version !== 4 && version !== 5) return fail(`unsupported quote version ${version}`);
  const attestationKeyType = dv.getUint16(2, true);
  const teeType = dv.getUint32(4, true);
  const qeVendorId = bytesToHex(quote.subarray(12, 28));

  let bodyType: 2 | 3 = 2;
  let bodyStart = HEADER_LEN;
  let bodyLen = TD10_BODY_LEN;
  if (version === 5) {
    const t = dv.getUint16(48, true);
    const size = dv.getUint32(50, true);
    if (t === 2 && size === TD10_BODY_LEN) bodyType = 2;
    else if (t === 3 && size === TD15_BODY_LEN) bodyType = 3;
    else return fail(`unsupported v5 body: type ${t} size ${size}`);
    bodyStart = HEADER_LEN + 6;
    bodyLen = size;
  }
  const signedEnd = bodyStart + bodyLen;
  if (quote.length < signedEnd + 4) {
    return fail(`quote too short for its body: ${quote.length} bytes`);
  }
  const report = parseTdReport(quote.subarray(bodyStart, signedEnd), bodyType === 3);

  const sigDataLen = dv.getUint32(signedEnd, true);
  const s = signedEnd + 4;
  const sigEnd = s + sigDataLen;
  if (sigEnd > quote.length) {
    return fail(`signature data length ${sigDataLen} exceeds the quote (${quote.length} bytes)`);
  }
  // Fixed part: signature 64, attestation key 64, cert type 2, cert size 4.
  if (sigDataLen < 134) return fail(`signature data too short: ${sigDataLen} bytes`);
  const signature = quote.subarray(s, s + 64);
  const attestationKey = quote.subarray(s + 64, s + 128);
  const certType = dv.getUint16(s + 128, true);
  const certSize = dv.getUint32(s + 130, true);
  const c = s + 134;
  if (certType !== CERT_DATA_QE_REPORT) {
    return fail(`unsupported certification data type ${certType} (expected 6, QE report)`);
  }
  if (c + certSize > sigEnd) {
    return fail(`certification data size ${certSize} exceeds signature data`);
  }
  const certEnd = c + certSize;
  if (c + QE_REPORT_LEN + 64 + 2 > certEnd) return fail("QE report certification data truncated");
  const qeReport = parseQeReport(quote.subarray(c, c + QE_REPORT_LEN));
  const qeReportSignature = quote.subarray(c + QE_REPORT_LEN, c + QE_REPORT_LEN + 64);
  const authStart = c + QE_REPORT_LEN + 64;
  const authLen = dv.getUint16(authStart, true);
  const qeAuthData = quote.subarray(authStart + 2, authStart + 2 + authLen);
  const inner = authStart + 2 + authLen;
  if (inner + 6 > certEnd) return fail("QE auth data exceeds certification data");
  const innerType = dv.getUint16(inner, true);
  const innerSize = dv.getUint32(inner + 2, true);
  if (innerType !== CERT_DATA_PCK_CHAIN) {
    return fail(`unsupported inner certification data type ${innerType} (expected 5, PCK chain)`);
  }
  if (inner + 6 + innerSize > certEnd) return fail("PCK chain exceeds certification data");
  const chainText = new TextDecoder().decode(quote.subarray(inner + 6, inner + 6 + innerSize));
  const pckChainPem = [
    ...chainText.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g),
  ]
    .map((m) => m[0] + "\n");
  const pckChainDer = pemCertificatesToDer(chainText);
  if (pckChainDer.length === 0) return fail("quote carries no PCK certificate");

  return {
    ok: true,
    quote: {
      version,
      attestationKeyType,
      teeType,
      qeVendorId,
      bodyType,
      report,
      signedRegion: quote.subarray(0, signedEnd),
      signature,
      attestationKey,
      qeReport,
      qeReportSignature,
      qeAuthData,
      pckChainPem,
      pckChainDer,
    },
  };
}
