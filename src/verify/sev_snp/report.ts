/**
 * AMD SEV-SNP attestation report (1184 bytes, ABI versions 2 and 3):
 * structural parse of the fields the gateway uses. Offsets per AMD's SNP ABI
 * (attestation.md §3). Trust decisions live in `verify_report.ts`.
 */
import { bytesToHex } from "../../aci/hex.ts";
import { type Checked, fail } from "../x509/verify_result.ts";

export const SNP_REPORT_LEN = 1184;
/** Bytes 0..0x2A0 are signed. */
export const SNP_SIGNED_LEN = 0x2a0;

/** The TCB version bytes of a `*_tcb` field (Milan/Genoa layout). */
export interface SnpTcb {
  bootloader: number;
  tee: number;
  snp: number;
  microcode: number;
}

/** Parsed report; byte fields are views into the input. */
export interface SnpReport {
  version: number;
  guestSvn: number;
  /** POLICY as a bigint (u64). */
  policy: bigint;
  /** POLICY bit 19. */
  debugAllowed: boolean;
  vmpl: number;
  signatureAlgo: number;
  currentTcb: SnpTcb;
  reportedTcb: SnpTcb;
  reportData: Uint8Array;
  measurement: Uint8Array;
  hostData: Uint8Array;
  idKeyDigest: Uint8Array;
  authorKeyDigest: Uint8Array;
  reportId: Uint8Array;
  chipId: Uint8Array;
  signedRegion: Uint8Array;
  /** R and S as stored: 72-byte little-endian fields. */
  signatureR: Uint8Array;
  signatureS: Uint8Array;
}

function tcbAt(dv: DataView, o: number): SnpTcb {
  return {
    bootloader: dv.getUint8(o),
    tee: dv.getUint8(o + 1),
    snp: dv.getUint8(o + 6),
    microcode: dv.getUint8(o + 7),
  };
}

/** Parses an SNP report; never throws. */
export function parseSnpReport(bytes: Uint8Array): Checked<{ report: SnpReport }> {
  if (bytes.length !== SNP_REPORT_LEN) {
    return fail(`SNP report must be ${SNP_REPORT_LEN} bytes, got ${bytes.length}`);
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = dv.getUint32(0, true);
  if (version < 2) return fail(`unsupported SNP report version ${version}`);
  const policy = dv.getBigUint64(0x08, true);
  const at = (o: number, n: number) => bytes.subarray(o, o + n);
  return {
    ok: true,
    report: {
      version,
      guestSvn: dv.getUint32(0x04, true),
      policy,
      debugAllowed: ((policy >> 19n) & 1n) === 1n,
      vmpl: dv.getUint32(0x30, true),
      signatureAlgo: dv.getUint32(0x34, true),
      currentTcb: tcbAt(dv, 0x38),
      reportedTcb: tcbAt(dv, 0x180),
      reportData: at(0x50, 64),
      measurement: at(0x90, 48),
      hostData: at(0xc0, 32),
      idKeyDigest: at(0xe0, 48),
      authorKeyDigest: at(0x110, 48),
      reportId: at(0x140, 32),
      chipId: at(0x1a0, 64),
      signedRegion: at(0, SNP_SIGNED_LEN),
      signatureR: at(0x2a0, 72),
      signatureS: at(0x2a0 + 72, 72),
    },
  };
}

/** Lowercase hex of the measurement-relevant fields (for claims). */
export function snpReportHex(r: SnpReport): {
  reportData: string;
  measurement: string;
  hostData: string;
  chipId: string;
} {
  return {
    reportData: bytesToHex(r.reportData),
    measurement: bytesToHex(r.measurement),
    hostData: bytesToHex(r.hostData),
    chipId: bytesToHex(r.chipId),
  };
}
