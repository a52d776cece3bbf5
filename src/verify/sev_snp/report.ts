/**
 * AMD SEV-SNP attestation report (1184 bytes, ABI versions 2, 3 and 5):
 * structural parse of the fields the gateway uses. Offsets per AMD's SNP ABI
 * (attestation.md §3). From version 3 the report names its CPU (CPUID family,
 * model, stepping), which fixes the product and so the TCB_VERSION layout:
 * Milan and Genoa put BL, TEE, SNP, microcode at bytes 0, 1, 6, 7; Turin puts
 * FMC, BL, TEE, SNP at 0..3 and microcode at 7. Turin's CHIP_ID is an 8-byte
 * hwID followed by zeros. Trust decisions live in `verify_report.ts`.
 */
import { bytesToHex } from "../../aci/hex.ts";
import type { SnpProduct } from "../../config/attestation_names.ts";
import { type Checked, fail } from "../x509/verify_result.ts";

export type { SnpProduct } from "../../config/attestation_names.ts";

export const SNP_REPORT_LEN = 1184;
/** Bytes 0..0x2A0 are signed. */
export const SNP_SIGNED_LEN = 0x2a0;

/** The TCB version of a `*_tcb` field; `fmc` only on Turin. */
export interface SnpTcb {
  fmc?: number;
  bootloader: number;
  tee: number;
  snp: number;
  microcode: number;
}

/** Parsed report; byte fields are views into the input. */
export interface SnpReport {
  version: number;
  /** The product the report's CPUID names (version ≥ 3), or null (version 2: any of the pinned roots). */
  product: SnpProduct | null;
  /** CPUID_FAM_ID, CPUID_MOD_ID, CPUID_STEP (version ≥ 3). */
  cpuid: { family: number; model: number; stepping: number } | null;
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
  /** 64 bytes as stored; on Turin the hwID is the first 8. */
  chipId: Uint8Array;
  /** The bytes a VCEK's hwID extension and the KDS path carry: 8 on Turin, else all 64. */
  hwId: Uint8Array;
  signedRegion: Uint8Array;
  /** R and S as stored: 72-byte little-endian fields. */
  signatureR: Uint8Array;
  signatureS: Uint8Array;
}

function tcbAt(dv: DataView, o: number, product: SnpProduct | null): SnpTcb {
  if (product === "Turin") {
    return {
      fmc: dv.getUint8(o),
      bootloader: dv.getUint8(o + 1),
      tee: dv.getUint8(o + 2),
      snp: dv.getUint8(o + 3),
      microcode: dv.getUint8(o + 7),
    };
  }
  return {
    bootloader: dv.getUint8(o),
    tee: dv.getUint8(o + 1),
    snp: dv.getUint8(o + 6),
    microcode: dv.getUint8(o + 7),
  };
}

/** AMD family 19h models 00–0Fh are Milan, 10–1Fh and A0–AFh Genoa; family 1Ah models 00–1Fh Turin. */
export function productOfCpuid(family: number, model: number): SnpProduct | null {
  if (family === 0x19 && model <= 0x0f) return "Milan";
  if (family === 0x19 && (model <= 0x1f || (model >= 0xa0 && model <= 0xaf))) return "Genoa";
  if (family === 0x1a && model <= 0x1f) return "Turin";
  return null;
}

/** Parses an SNP report; never throws. */
export function parseSnpReport(bytes: Uint8Array): Checked<{ report: SnpReport }> {
  if (bytes.length !== SNP_REPORT_LEN) {
    return fail(`SNP report must be ${SNP_REPORT_LEN} bytes, got ${bytes.length}`);
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = dv.getUint32(0, true);
  if (version < 2 || version > 5) return fail(`unsupported SNP report version ${version}`);
  const policy = dv.getBigUint64(0x08, true);
  const at = (o: number, n: number) => bytes.subarray(o, o + n);
  let cpuid: SnpReport["cpuid"] = null;
  let product: SnpProduct | null = null;
  // Some version-3 firmware leaves the CPUID bytes zero: treated like version 2.
  if (version >= 3 && (bytes[0x188] | bytes[0x189] | bytes[0x18a]) !== 0) {
    cpuid = { family: bytes[0x188], model: bytes[0x189], stepping: bytes[0x18a] };
    product = productOfCpuid(cpuid.family, cpuid.model);
    if (!product) {
      return fail(
        `SNP report CPUID family 0x${cpuid.family.toString(16)} model 0x${
          cpuid.model.toString(16)
        } is not a Milan, Genoa or Turin CPU`,
      );
    }
  }
  const chipId = at(0x1a0, 64);
  return {
    ok: true,
    report: {
      version,
      product,
      cpuid,
      guestSvn: dv.getUint32(0x04, true),
      policy,
      debugAllowed: ((policy >> 19n) & 1n) === 1n,
      vmpl: dv.getUint32(0x30, true),
      signatureAlgo: dv.getUint32(0x34, true),
      currentTcb: tcbAt(dv, 0x38, product),
      reportedTcb: tcbAt(dv, 0x180, product),
      reportData: at(0x50, 64),
      measurement: at(0x90, 48),
      hostData: at(0xc0, 32),
      idKeyDigest: at(0xe0, 48),
      authorKeyDigest: at(0x110, 48),
      reportId: at(0x140, 32),
      chipId,
      hwId: product === "Turin" ? chipId.subarray(0, 8) : chipId,
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
