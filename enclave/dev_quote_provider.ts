/**
 * The development quote provider for machines without a TEE. Its "quotes"
 * (the format is src/aci/dev_quote.ts, shared with the verifiers) bind the
 * report data, so clients can exercise the REPORTDATA check, but are signed by
 * nothing: anyone can make one, so they are worthless as evidence.
 */

import { DEV_TEE_TYPE, devQuote } from "../src/aci/mod.ts";
import { assertReportData, type Quote, type QuoteProvider } from "./quote_provider.ts";

/** Printed by the gateway at start-up whenever the dev provider is in use. */
export const DEV_QUOTE_WARNING =
  "WARNING: no TEE in use: attestation quotes come from the development provider " +
  `(tee_type "${DEV_TEE_TYPE}"). They are not hardware evidence and prove nothing ` +
  "about this machine; do not send confidential data to this gateway.";

/** A provider that never touches hardware and says so (`hardware: false`). */
export function createDevQuoteProvider(): QuoteProvider {
  return {
    name: "dev-insecure",
    hardware: false,
    getQuote(reportData: Uint8Array): Promise<Quote> {
      try {
        assertReportData(reportData);
        return Promise.resolve({
          tee_type: DEV_TEE_TYPE,
          provider: "dev-insecure",
          quote: devQuote(reportData),
        });
      } catch (e) {
        return Promise.reject(e);
      }
    },
  };
}
