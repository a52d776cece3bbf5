/**
 * Development quote provider for machines without a TEE. Its "quotes" bind
 * the report data (so clients can exercise the REPORTDATA check) but are
 * signed by nothing: anyone can make one, so they are worthless as evidence.
 * The format is deliberately unlike any TDX quote or SNP report.
 */

import { createHash } from "node:crypto";
import { assertReportData, type Quote, type QuoteProvider } from "./quote_provider.ts";

/** The `tee_type` of dev quotes: plainly not a hardware type. */
export const DEV_TEE_TYPE = "dev-insecure-no-tee";
/** ASCII magic opening every dev quote (its first bytes can't parse as a TDX version). */
export const DEV_QUOTE_MAGIC = "DEV-NO-TEE-QUOTE v1";
/** magic ‖ report_data (64) ‖ sha256(magic ‖ report_data) (32). */
export const DEV_QUOTE_LENGTH = DEV_QUOTE_MAGIC.length + 64 + 32;

/** Printed by the gateway at start-up whenever the dev provider is in use. */
export const DEV_QUOTE_WARNING =
  "WARNING: no TEE in use: attestation quotes come from the development provider " +
  `(tee_type "${DEV_TEE_TYPE}"). They are not hardware evidence and prove nothing ` +
  "about this machine; do not send confidential data to this gateway.";

const MAGIC_BYTES = new TextEncoder().encode(DEV_QUOTE_MAGIC);

function digest(reportData: Uint8Array): Uint8Array {
  return createHash("sha256").update(MAGIC_BYTES).update(reportData).digest();
}

/** The dev quote for given report data. */
export function encodeDevQuote(reportData: Uint8Array): Uint8Array {
  assertReportData(reportData);
  const quote = new Uint8Array(DEV_QUOTE_LENGTH);
  quote.set(MAGIC_BYTES, 0);
  quote.set(reportData, MAGIC_BYTES.length);
  quote.set(digest(reportData), MAGIC_BYTES.length + 64);
  return quote;
}

/** The report data of a well-formed dev quote, or null if `quote` is not one. */
export function decodeDevQuote(quote: Uint8Array): Uint8Array | null {
  if (quote.length !== DEV_QUOTE_LENGTH) return null;
  for (let i = 0; i < MAGIC_BYTES.length; i++) if (quote[i] !== MAGIC_BYTES[i]) return null;
  const reportData = quote.slice(MAGIC_BYTES.length, MAGIC_BYTES.length + 64);
  const expected = digest(reportData);
  const actual = quote.subarray(MAGIC_BYTES.length + 64);
  for (let i = 0; i < 32; i++) if (actual[i] !== expected[i]) return null;
  return reportData;
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
