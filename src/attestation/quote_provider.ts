/**
 * The quote provider interface the gateway consumes: give it the 64-byte
 * report-data slot, get back TEE evidence binding exactly those bytes.
 * Defined beside its consumer (`src/attestation/reports.ts`); the providers
 * in `enclave/` implement it.
 */

/** Size of the TEE report-data slot (TDX REPORTDATA, SNP REPORT_DATA). */
export const REPORT_DATA_LENGTH = 64;

/** One piece of TEE evidence. */
export interface Quote {
  /** `"tdx"`, `"sev_snp"`, or a plainly non-hardware value such as `"dev-insecure-no-tee"`. */
  tee_type: string;
  /** Which mechanism produced it, e.g. the configfs-tsm provider `"tdx_guest"`. */
  provider: string;
  /** The quote (TDX) or attestation report (SNP) bytes. */
  quote: Uint8Array;
  /** Auxiliary evidence, e.g. the SNP certificate table from `auxblob`. */
  aux?: Uint8Array;
}

/** Something that can produce a quote over given report data. */
export interface QuoteProvider {
  readonly name: string;
  /** True only when the quote comes from TEE hardware. */
  readonly hardware: boolean;
  /** `reportData` must be exactly 64 bytes; anything else is rejected. */
  getQuote(reportData: Uint8Array): Promise<Quote>;
}

/** Throws unless `reportData` is a Uint8Array of exactly 64 bytes. */
export function assertReportData(reportData: unknown): asserts reportData is Uint8Array {
  if (!(reportData instanceof Uint8Array)) {
    throw new TypeError("report data must be a Uint8Array");
  }
  if (reportData.length !== REPORT_DATA_LENGTH) {
    throw new RangeError(
      `report data must be exactly ${REPORT_DATA_LENGTH} bytes, got ${reportData.length}`,
    );
  }
}
