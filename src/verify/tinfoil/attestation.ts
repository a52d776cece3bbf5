/**
 * Tinfoil's enclave attestation documents, as its enclaves serve them at
 * `/.well-known/tinfoil-attestation` (`{format, body}`) and as its
 * attestation bundles carry them (`{enclaveAttestationReport, vcek,
 * enclaveCert, digest, sigstoreBundle}`): `body` is base64 of a gzip'd raw
 * report — a TDX quote (`tdx-guest/v2`) or a 1184-byte SEV-SNP report
 * (`sev-snp-guest/v2`). In both, REPORTDATA is `sha256(TLS SPKI DER) ‖ HPKE
 * X25519 public key`: the report binds the TLS key the enclave serves with
 * and the key EHBP clients encrypt to. There is no nonce: freshness is the
 * TLS key, generated in the enclave and never leaving it.
 */
import { gunzipSync } from "node:zlib";
import { bytesToHex } from "../../aci/mod.ts";
import { isRecord } from "../json_shape.ts";
import { type Checked, fail } from "../x509/verify_result.ts";

const TDX_GUEST_V2 = "https://tinfoil.sh/predicate/tdx-guest/v2";
const SEV_SNP_GUEST_V2 = "https://tinfoil.sh/predicate/sev-snp-guest/v2";

/** A decoded attestation document. */
export interface TinfoilDocument {
  format: string;
  platform: "tdx" | "sev-snp";
  /** The raw TDX quote or SEV-SNP report. */
  report: Uint8Array;
}

/** What an attestation bundle adds (each absent when the enclave served a bare document). */
export interface TinfoilEvidence {
  document: TinfoilDocument;
  /** DER of the VCEK (SEV-SNP). */
  vcekDer: Uint8Array | null;
  /** The release's Sigstore bundle (JSON) and its subject digest. */
  sigstoreBundle: unknown;
  releaseDigest: string | null;
}

/** Reports are a few KiB; a larger inflation is refused, never allocated. */
const MAX_REPORT_BYTES = 64 * 1024;

function b64(s: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/** Decodes `{format, body}`. */
export function parseTinfoilDocument(v: unknown): Checked<{ document: TinfoilDocument }> {
  if (!isRecord(v)) return fail("attestation document is not a JSON object");
  const format = v["format"];
  const platform = format === TDX_GUEST_V2 ? "tdx" : format === SEV_SNP_GUEST_V2 ? "sev-snp" : null;
  if (platform === null) {
    return fail(
      `attestation format ${JSON.stringify(format)} is not tdx-guest/v2 or sev-snp-guest/v2`,
    );
  }
  const body = typeof v["body"] === "string" ? b64(v["body"]) : null;
  if (body === null) return fail("attestation body is not base64");
  let report: Uint8Array;
  try {
    report = new Uint8Array(gunzipSync(body, { maxOutputLength: MAX_REPORT_BYTES }));
  } catch {
    return fail(`attestation body is not gzip of at most ${MAX_REPORT_BYTES} bytes`);
  }
  return { ok: true, document: { format: format as string, platform, report } };
}

/** Decodes a bare document or an attestation bundle. */
export function parseTinfoilEvidence(v: unknown): Checked<{ evidence: TinfoilEvidence }> {
  if (!isRecord(v)) return fail("attestation is not a JSON object");
  const bundled = isRecord(v["enclaveAttestationReport"]);
  const d = parseTinfoilDocument(bundled ? v["enclaveAttestationReport"] : v);
  if (!d.ok) return d;
  let vcekDer: Uint8Array | null = null;
  if (bundled && v["vcek"] !== undefined) {
    vcekDer = typeof v["vcek"] === "string" ? b64(v["vcek"]) : null;
    if (vcekDer === null) return fail("bundle vcek is not base64 DER");
  }
  const digest = bundled ? v["digest"] : undefined;
  if (digest !== undefined && (typeof digest !== "string" || !/^[0-9a-fA-F]{64}$/.test(digest))) {
    return fail("bundle digest is not a sha256 hex digest");
  }
  return {
    ok: true,
    evidence: {
      document: d.document,
      vcekDer,
      sigstoreBundle: bundled ? v["sigstoreBundle"] ?? null : null,
      releaseDigest: typeof digest === "string" ? digest.toLowerCase() : null,
    },
  };
}

/** The two keys REPORTDATA binds. */
export function tinfoilBinding(
  reportData: Uint8Array,
): Checked<{ tlsFingerprint: string; hpkePublicKey: string }> {
  if (reportData.length !== 64) return fail(`report data is ${reportData.length} bytes, not 64`);
  return {
    ok: true,
    tlsFingerprint: bytesToHex(reportData.subarray(0, 32)),
    hpkePublicKey: bytesToHex(reportData.subarray(32)),
  };
}

/**
 * The enclave's registers against a SnpTdxMultiPlatformV1 release
 * `[SNP MEASUREMENT, TDX RTMR1, TDX RTMR2]`: SEV-SNP compares MEASUREMENT;
 * TDX compares RTMR1 and RTMR2 (MRTD and RTMR0 are the platform's firmware,
 * not the release's, and are left to the measurement policy).
 */
export function matchRelease(
  platform: TinfoilDocument["platform"],
  measured: { snpMeasurement?: string; rtmr1?: string; rtmr2?: string },
  registers: readonly string[],
): Checked {
  if (platform === "sev-snp") {
    return measured.snpMeasurement === registers[0]
      ? { ok: true }
      : fail(`SEV-SNP MEASUREMENT ${measured.snpMeasurement} is not the release's ${registers[0]}`);
  }
  if (measured.rtmr1 !== registers[1]) {
    return fail(`TDX RTMR1 ${measured.rtmr1} is not the release's ${registers[1]}`);
  }
  if (measured.rtmr2 !== registers[2]) {
    return fail(`TDX RTMR2 ${measured.rtmr2} is not the release's ${registers[2]}`);
  }
  return { ok: true };
}
