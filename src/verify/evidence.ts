/**
 * Checks on the TEE evidence of a report: that the quote's report-data slot
 * carries exactly the expected 64 bytes, and whether the quote is hardware
 * evidence at all. Hardware signature verification (TDX DCAP, SEV-SNP VCEK
 * chain) is injected as a {@link QuoteCheck}; without one a hardware quote is
 * reported as unverified, never as passing.
 */

import { bytesEqual, bytesToHex, hexToBytes } from "../aci/hex.ts";
import { type Check, check } from "./checks.ts";
import { isRecord, stringField } from "./json_shape.ts";
import { quoteReportDataSlot } from "./quote_slot.ts";

/**
 * Verifies a hardware quote's signature chain and that its report data is
 * `expectedSlot`; returns one check (thrown errors become a failed check).
 */
export type QuoteCheck = (
  quote: Uint8Array,
  expectedSlot: Uint8Array,
  teeType: string,
) => Check | Promise<Check>;

/** Options shared by the report verifiers. */
export interface EvidenceOptions {
  quoteCheck?: QuoteCheck;
  /**
   * Accept a development quote with a warning instead of failing. Even then
   * the check's detail says it is not hardware evidence.
   */
  allowDevEvidence?: boolean;
}

/** The quote bytes of an `evidence` object (`quote` hex), or an error message. */
export function evidenceQuote(evidence: unknown): Uint8Array | string {
  if (!isRecord(evidence)) return "report has no evidence object";
  const hex = stringField(evidence, "quote");
  if (hex === undefined) return "evidence has no quote";
  try {
    return hexToBytes(hex.startsWith("0x") ? hex.slice(2) : hex);
  } catch {
    return "evidence quote is not hex";
  }
}

/**
 * `<prefix>.quote_report_data` and `<prefix>.hardware_evidence` for `quote`
 * against `expectedSlot` (null when the expected value could not be
 * computed, which fails the binding check).
 */
// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
export async function evidenceChecks(
  prefix: string,
  teeType: string,
  quote: Uint8Array | string,
  expectedSlot: Uint8Array | null,
  opts: EvidenceOptions,
): Promise<Check[]> {
  const bindName = `${prefix}.quote_report_data`;
  const hwName = `${prefix}.hardware_evidence`;
  if (typeof quote === "string") {
    return [check(bindName, false, quote), check(hwName, false, "no quote to verify")];
  }
  let parsed;
  try {
    parsed = quoteReportDataSlot(teeType, quote);
  } catch (e) {
    const msg = e instanceof Error ? e.message : "unparseable quote";
    return [check(bindName, false, msg), check(hwName, false, "quote could not be parsed")];
  }
  const checks: Check[] = [];
  if (expectedSlot === null) {
    checks.push(check(bindName, false, "expected report data could not be computed"));
  } else if (bytesEqual(parsed.slot, expectedSlot)) {
    checks.push(check(bindName, true, `${parsed.format} carries the expected report data`));
  } else {
    checks.push(
      check(
        bindName,
        false,
        `${parsed.format} report data ${bytesToHex(parsed.slot)} != expected ${
          bytesToHex(expectedSlot)
        }`,
      ),
    );
  }

  if (parsed.kind === "dev") {
    checks.push(
      opts.allowDevEvidence
        ? check(
          hwName,
          true,
          `WARNING: quote is development evidence, not hardware (tee_type "${teeType}"); accepted only because development evidence was explicitly allowed`,
        )
        : check(
          hwName,
          false,
          `quote is development evidence, not hardware (tee_type "${teeType}"): nothing proves a TEE`,
        ),
    );
    return checks;
  }
  if (teeType !== parsed.kind) {
    checks.push(check(hwName, false, `tee_type "${teeType}" does not match a ${parsed.format}`));
    return checks;
  }
  if (expectedSlot === null) {
    checks.push(
      check(hwName, false, `${parsed.format} not verified: expected report data unknown`),
    );
    return checks;
  }
  if (!opts.quoteCheck) {
    checks.push(
      check(hwName, false, `${parsed.format} signature not verified: no quote verifier supplied`),
    );
    return checks;
  }
  try {
    const result = await opts.quoteCheck(quote, expectedSlot, teeType);
    checks.push({ ...result, name: hwName, detail: `${parsed.format}: ${result.detail}` });
  } catch (e) {
    checks.push(
      check(
        hwName,
        false,
        `quote verification failed: ${e instanceof Error ? e.message : "error"}`,
      ),
    );
  }
  return checks;
}
