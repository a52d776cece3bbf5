/**
 * Offline verification of a canonical ACI attestation report
 * (`GET /v1/aci/attestation`): recompute the keyset digest from the served
 * keyset's JCS form, rebuild the attestation statement with the nonce the
 * client sent, and check that the quote's report-data slot carries it.
 * Hardware signature verification is injected (see evidence.ts).
 */

import { sha256Prefixed } from "../aci/digest.ts";
import { bytesToHex } from "../aci/hex.ts";
import { jcsBytes } from "../aci/jcs.ts";
import type { WorkloadKeyset } from "../aci/keyset.ts";
import { reportData, reportDataSlot } from "../aci/statement.ts";
import { type Check, check } from "./checks.ts";
import { evidenceChecks, type EvidenceOptions, evidenceQuote } from "./evidence.ts";
import { isRecord, recordField, stringField } from "./json_shape.ts";

export type { QuoteCheck } from "./evidence.ts";

/** Options of {@link verifyReport}. */
export interface ReportVerifyOptions extends EvidenceOptions {
  /**
   * The nonce sent with the report request (64 lowercase hex), or null when
   * none was sent (the report is then not fresh). Undefined is treated as null.
   */
  nonce?: string | null;
  /** Epoch milliseconds; when given, the keyset's `not_after` is checked. */
  now?: () => number;
}

const NONCE_RE = /^[0-9a-f]{64}$/;

/**
 * The keyset carried by a report (`attestation.workload_keyset`), or the
 * value itself when it is a bare keyset; null when neither.
 */
export function extractKeyset(reportOrKeyset: unknown): WorkloadKeyset | null {
  if (!isRecord(reportOrKeyset)) return null;
  const attestation = recordField(reportOrKeyset, "attestation");
  const candidate = attestation ? attestation["workload_keyset"] : reportOrKeyset;
  if (!isRecord(candidate) || !Array.isArray(candidate["receipt_signing_keys"])) return null;
  return candidate as unknown as WorkloadKeyset;
}

/** `sha256:` digest of the JCS form of whatever keyset value was served. */
export function servedKeysetDigest(keyset: unknown): string {
  return sha256Prefixed(jcsBytes(keyset));
}

/**
 * Verifies a canonical report. Returns one check per step:
 * `report.api_version`, `report.workload_keyset_digest`, `report.report_data`,
 * optionally `report.not_after`, then `report.quote_report_data` and
 * `report.hardware_evidence`.
 */
export async function verifyReport(
  report: unknown,
  opts: ReportVerifyOptions = {},
): Promise<Check[]> {
  const checks: Check[] = [];
  if (!isRecord(report)) return [check("report.format", false, "report is not a JSON object")];

  const version = report["api_version"];
  checks.push(
    check("report.api_version", version === "aci/1", `api_version ${JSON.stringify(version)}`),
  );

  const attestation = recordField(report, "attestation");
  const rawKeyset = attestation?.["workload_keyset"];
  const stated = stringField(report, "workload_keyset_digest");
  let digest: string | null = null;
  if (!isRecord(rawKeyset)) {
    checks.push(
      check("report.workload_keyset_digest", false, "report has no attestation.workload_keyset"),
    );
  } else {
    digest = servedKeysetDigest(rawKeyset);
    checks.push(
      check(
        "report.workload_keyset_digest",
        stated === digest,
        stated === digest
          ? `JCS(keyset) hashes to ${digest}`
          : `report states ${stated ?? "(none)"}, JCS(keyset) hashes to ${digest}`,
      ),
    );
  }

  const nonce = opts.nonce ?? null;
  let expected: Uint8Array | null = null;
  if (nonce !== null && !NONCE_RE.test(nonce)) {
    checks.push(check("report.report_data", false, "the nonce to check must be 64 lowercase hex"));
  } else if (digest === null) {
    checks.push(check("report.report_data", false, "no keyset to rebuild the statement from"));
  } else {
    const rd = reportData(digest, nonce);
    expected = reportDataSlot(rd);
    const statedRd = attestation ? stringField(attestation, "report_data") : undefined;
    const ok = statedRd === bytesToHex(rd);
    const binding = nonce === null
      ? "statement with nonce null: the report is NOT fresh (no nonce was sent; it may be a replay)"
      : `statement binds nonce ${nonce}`;
    checks.push(
      check(
        "report.report_data",
        ok,
        ok
          ? binding
          : `report_data ${statedRd ?? "(none)"} != sha256(statement) ${
            bytesToHex(rd)
          } (${binding})`,
      ),
    );
  }

  if (opts.now && isRecord(rawKeyset)) {
    const notAfter = rawKeyset["not_after"];
    const nowS = Math.floor(opts.now() / 1000);
    const ok = typeof notAfter === "number" && nowS < notAfter;
    checks.push(
      check(
        "report.not_after",
        ok,
        typeof notAfter === "number"
          ? `keyset not_after ${notAfter}, now ${nowS}`
          : "keyset has no numeric not_after",
      ),
    );
  }

  const teeType = attestation ? stringField(attestation, "tee_type") ?? "(none)" : "(none)";
  const quote = evidenceQuote(attestation?.["evidence"]);
  checks.push(...await evidenceChecks("report", teeType, quote, expected, opts));
  return checks;
}
