/**
 * REPORTDATA layouts of the dstack vllm-proxy lineage (attestation.md §4):
 * v1 `address right-padded to 32 ‖ nonce` and v2 (TLS binding)
 * `sha256(address ‖ sha256(SPKI DER)) ‖ nonce`. Only v2 ties the quote to
 * the upstream's TLS key.
 */
import { createHash } from "node:crypto";
import { bytesEqual } from "../../aci/mod.ts";
import { type Checked, fail } from "../x509/verify_result.ts";

/** What the caller expects the quote to bind. */
export type ReportDataExpectation =
  | { version: "v1"; address: Uint8Array; nonce: Uint8Array }
  | { version: "v2"; address: Uint8Array; spkiSha256: Uint8Array; nonce: Uint8Array };

/** The 64 expected bytes, or a reason the inputs are unusable. */
export function expectedReportData(e: ReportDataExpectation): Checked<{ reportData: Uint8Array }> {
  if (e.nonce.length !== 32) return fail(`nonce must be 32 bytes, got ${e.nonce.length}`);
  if (e.address.length === 0) return fail("address is empty");
  const out = new Uint8Array(64);
  if (e.version === "v1") {
    if (e.address.length > 32) {
      return fail(`v1 address must be at most 32 bytes, got ${e.address.length}`);
    }
    out.set(e.address, 0);
  } else {
    if (e.spkiSha256.length !== 32) {
      return fail(`SPKI sha256 must be 32 bytes, got ${e.spkiSha256.length}`);
    }
    out.set(createHash("sha256").update(e.address).update(e.spkiSha256).digest(), 0);
  }
  out.set(e.nonce, 32);
  return { ok: true, reportData: out };
}

/** Compares a quote's REPORTDATA with the expectation, naming the half that differs. */
export function checkReportData(actual: Uint8Array, e: ReportDataExpectation): Checked {
  if (actual.length !== 64) return fail(`report data must be 64 bytes, got ${actual.length}`);
  const exp = expectedReportData(e);
  if (!exp.ok) return exp;
  if (!bytesEqual(actual.subarray(32), exp.reportData.subarray(32))) {
    return fail("report data nonce does not match the request nonce");
  }
  if (!bytesEqual(actual.subarray(0, 32), exp.reportData.subarray(0, 32))) {
    return fail(
      e.version === "v1"
        ? "report data (v1) does not carry the signing address"
        : "report data (v2) does not bind the signing address and TLS key",
    );
  }
  return { ok: true };
}
