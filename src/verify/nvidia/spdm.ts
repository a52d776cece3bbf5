/**
 * NVIDIA GPU attestation evidence: the SPDM 1.1 GET_MEASUREMENTS request
 * (37 bytes) followed by the MEASUREMENTS response, parsed field by field.
 * The signed range is taken from the parsed structure (everything before
 * the 96-byte signature), not "all but the last 96 bytes": real captures
 * carry trailing bytes; only zero padding after the signature is accepted.
 */
import { bytesToHex } from "../../aci/mod.ts";
import type { Checked } from "../x509/verify_result.ts";
import { fail } from "../x509/verify_result.ts";

/** Request length: version, code, param1, param2, nonce[32], slot id. */
const REQUEST_LENGTH = 37;
/** Raw r‖s of an ECDSA P-384 signature. */
const SIGNATURE_LENGTH = 96;
const NONCE_LENGTH = 32;

/** Opaque-data TLV types the verifier reads. */
export const OPAQUE = {
  DRIVER_VERSION: 3,
  VBIOS_VERSION: 6,
  NVDEC0_STATUS: 11,
  CHIP_SKU: 15,
  PROJECT: 17,
  PROJECT_SKU: 18,
  FWID: 20,
  CHIP_INFO: 35,
  FEATURE_FLAG: 36,
} as const;

/** One DMTF measurement block (1-based index as in SPDM). */
export interface MeasurementBlock {
  index: number;
  valueType: number;
  value: Uint8Array;
}

export interface SpdmEvidence {
  /** The nonce the verifier asked for (request bytes 4..36). */
  requestNonce: Uint8Array;
  blocks: MeasurementBlock[];
  /** Opaque TLVs by type (the first of each type). */
  opaque: Map<number, Uint8Array>;
  /** Request ‖ response up to and including the opaque data. */
  signedMessage: Uint8Array;
  signature: Uint8Array;
  /** Zero bytes found after the signature (tolerated padding). */
  trailingBytes: number;
}

const u16 = (b: Uint8Array, o: number) => b[o] | (b[o + 1] << 8);
const u24 = (b: Uint8Array, o: number) => b[o] | (b[o + 1] << 8) | (b[o + 2] << 16);

/** Parses request ‖ response; never throws. */
export function parseSpdmEvidence(bytes: Uint8Array): Checked<{ evidence: SpdmEvidence }> {
  if (bytes.length < REQUEST_LENGTH + 8 + SIGNATURE_LENGTH) {
    return fail(`evidence is ${bytes.length} bytes, too short for an SPDM request and response`);
  }
  if (bytes[1] !== 0xe0) {
    return fail(`request code 0x${bytes[1].toString(16)} is not GET_MEASUREMENTS (0xe0)`);
  }
  if ((bytes[2] & 1) !== 1) return fail("the request did not ask for a signed response");
  const requestNonce = bytes.slice(4, 4 + NONCE_LENGTH);
  const r = REQUEST_LENGTH;
  if (bytes[r + 1] !== 0x60) {
    return fail(`response code 0x${bytes[r + 1].toString(16)} is not MEASUREMENTS (0x60)`);
  }
  const count = bytes[r + 4];
  const recordLength = u24(bytes, r + 5);
  const recordStart = r + 8;
  const recordEnd = recordStart + recordLength;
  // responder nonce (32) + opaque length (2) must follow the record.
  if (recordEnd + NONCE_LENGTH + 2 > bytes.length) {
    return fail("measurement record runs past the end of the evidence");
  }
  const blocks: MeasurementBlock[] = [];
  let o = recordStart;
  for (let i = 0; i < count; i++) {
    if (o + 4 > recordEnd) return fail(`measurement block ${i + 1} runs past the record`);
    const index = bytes[o];
    const size = u16(bytes, o + 2);
    const body = o + 4;
    if (body + size > recordEnd || size < 3) {
      return fail(`measurement block ${index} has a bad size ${size}`);
    }
    const valueType = bytes[body];
    const valueSize = u16(bytes, body + 1);
    if (valueSize !== size - 3) return fail(`measurement block ${index} has a bad value size`);
    blocks.push({ index, valueType, value: bytes.slice(body + 3, body + 3 + valueSize) });
    o = body + size;
  }
  if (o !== recordEnd) return fail("measurement record length does not match its blocks");
  const opaqueLengthAt = recordEnd + NONCE_LENGTH;
  const opaqueLength = u16(bytes, opaqueLengthAt);
  const opaqueStart = opaqueLengthAt + 2;
  const signedEnd = opaqueStart + opaqueLength;
  if (signedEnd + SIGNATURE_LENGTH > bytes.length) {
    return fail("opaque data and signature run past the end of the evidence");
  }
  const opaque = new Map<number, Uint8Array>();
  let t = opaqueStart;
  while (t < signedEnd) {
    if (t + 4 > signedEnd) return fail("opaque data ends inside a TLV header");
    const type = u16(bytes, t);
    const len = u16(bytes, t + 2);
    if (t + 4 + len > signedEnd) return fail(`opaque TLV type ${type} runs past the opaque data`);
    if (!opaque.has(type)) opaque.set(type, bytes.slice(t + 4, t + 4 + len));
    t += 4 + len;
  }
  const trailing = bytes.subarray(signedEnd + SIGNATURE_LENGTH);
  if (trailing.some((b) => b !== 0)) {
    return fail(`${trailing.length} non-zero bytes follow the signature`);
  }
  return {
    ok: true,
    evidence: {
      requestNonce,
      blocks,
      opaque,
      signedMessage: bytes.slice(0, signedEnd),
      signature: bytes.slice(signedEnd, signedEnd + SIGNATURE_LENGTH),
      trailingBytes: trailing.length,
    },
  };
}

/** The driver version (type 3, NUL-terminated ASCII), or null. */
export function driverVersion(e: SpdmEvidence): string | null {
  const v = e.opaque.get(OPAQUE.DRIVER_VERSION);
  if (!v) return null;
  const end = v.indexOf(0);
  return new TextDecoder().decode(end < 0 ? v : v.subarray(0, end));
}

/** The VBIOS version as NVIDIA prints it (`96.00.9F.00.01`), or null. */
export function vbiosVersion(e: SpdmEvidence): string | null {
  const v = e.opaque.get(OPAQUE.VBIOS_VERSION);
  if (!v || v.length !== 8) return null;
  // The 8 bytes as a little-endian number in hex, rearranged as h[8:16] + h[6:8] (nvtrust utils).
  const h = bytesToHex(v.slice().reverse());
  const s = (h.slice(8, 16) + h.slice(6, 8)).toUpperCase();
  return s.match(/../g)!.join(".");
}

/** An ASCII opaque field with NULs stripped, or null. */
export function opaqueText(e: SpdmEvidence, type: number): string | null {
  const v = e.opaque.get(type);
  if (!v) return null;
  return new TextDecoder().decode(v.filter((b) => b !== 0));
}
