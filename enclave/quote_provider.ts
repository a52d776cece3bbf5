/**
 * The quote provider contract, re-exported for the providers in this folder
 * and the build's compile check; it is defined beside its consumer in
 * `src/attestation/quote_provider.ts`.
 */
export {
  assertReportData,
  type Quote,
  type QuoteProvider,
  REPORT_DATA_LENGTH,
} from "../src/attestation/mod.ts";
