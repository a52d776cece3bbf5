/**
 * Development quote provider for machines without a TEE. Its "quotes" bind
 * the report data (so clients can exercise the REPORTDATA check) but are
 * signed by nothing: anyone can make one, so they are worthless as evidence.
 * The format is deliberately unlike any TDX quote or SNP report.
 */

import {
  DEV_QUOTE_LENGTH,
  DEV_QUOTE_MAGIC,
  devQuote,
  parseDevQuote,
} from "../src/aci/dev_quote.ts";
import { assertReportData, type Quote, type QuoteProvider } from "./quote_provider.ts";

// One definition of the format, shared with the verifier side (src/aci/dev_quote.ts).
export { DEV_QUOTE_LENGTH, DEV_QUOTE_MAGIC };

/** The `tee_type` of dev quotes: plainly not a hardware type. */
export const DEV_TEE_TYPE = "dev-insecure-no-tee";

/** Printed by the gateway at start-up whenever the dev provider is in use. */
export const DEV_QUOTE_WARNING =
  "WARNING: no TEE in use: attestation quotes come from the development provider " +
  `(tee_type "${DEV_TEE_TYPE}"). They are not hardware evidence and prove nothing ` +
  "about this machine; do not send confidential data to this gateway.";

/** The dev quote for given report data: magic ‖ report_data ‖ sha256(magic ‖ report_data). */
export function encodeDevQuote(reportData: Uint8Array): Uint8Array {
  assertReportData(reportData);
  return devQuote(reportData);
}

/** The report data of a well-formed dev quote, or null if `quote` is not one. */
export function decodeDevQuote(quote: Uint8Array): Uint8Array | null {
  try {
    return parseDevQuote(quote);
  } catch {
    return null;
  }
}

/** A provider that never touches hardware and says so (`hardware: false`). */
export function createDevQuoteProvider(): QuoteProvider {
  return {
    name: "dev-insecure",
    hardware: false,
    getQuote(reportData: Uint8Array): Promise<Quote> {
      try {
        return Promise.resolve({
          tee_type: DEV_TEE_TYPE,
          provider: "dev-insecure",
          quote: encodeDevQuote(reportData),
        });
      } catch (e) {
        return Promise.reject(e);
      }
    },
  };
}
