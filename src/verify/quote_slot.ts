/**
 * Locates the 64-byte report-data slot inside the evidence formats a gateway
 * report can carry: the development quote (not hardware evidence), Intel TDX
 * quotes v4 (REPORTDATA at 568) and v5 (at 574), and the AMD SEV-SNP report
 * (REPORT_DATA at 0x50). Only the location is checked here; the hardware
 * signature chain is verified elsewhere and injected.
 */

import { isDevQuote, parseDevQuote } from "../aci/dev_quote.ts";

/** Which evidence format the slot came from. */
export type QuoteKind = "dev" | "tdx" | "sev_snp";

/** Result of {@link quoteReportDataSlot}. */
export interface QuoteSlot {
  kind: QuoteKind;
  slot: Uint8Array;
  /** Human-readable format description, e.g. "TDX quote v4". */
  format: string;
}

const TDX_TEE_TYPE = 0x81;
const SNP_REPORT_LENGTH = 1184;

function u16(b: Uint8Array, off: number): number {
  return b[off] | (b[off + 1] << 8);
}

function u32(b: Uint8Array, off: number): number {
  return (b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) | (b[off + 3] << 24)) >>> 0;
}

function tdxSlot(q: Uint8Array): QuoteSlot {
  if (q.length < 48) throw new Error("quote too short for a TDX header");
  const version = u16(q, 0);
  if (u32(q, 4) !== TDX_TEE_TYPE) throw new Error("quote header is not a TDX quote (TEE type)");
  let offset: number;
  if (version === 4) {
    offset = 568;
  } else if (version === 5) {
    // v5 inserts a 6-byte body descriptor (type 2 = TDX 1.0, 3 = TDX 1.5) before the body.
    const bodyType = u16(q, 48);
    if (bodyType !== 2 && bodyType !== 3) {
      throw new Error(`unsupported TDX v5 body type ${bodyType}`);
    }
    offset = 574;
  } else {
    throw new Error(`unsupported TDX quote version ${version}`);
  }
  if (q.length < offset + 64) throw new Error("TDX quote truncated before REPORTDATA");
  return { kind: "tdx", slot: q.slice(offset, offset + 64), format: `TDX quote v${version}` };
}

function snpSlot(r: Uint8Array): QuoteSlot {
  if (r.length < SNP_REPORT_LENGTH) throw new Error("SEV-SNP report shorter than 1184 bytes");
  return { kind: "sev_snp", slot: r.slice(0x50, 0x90), format: `SEV-SNP report v${u32(r, 0)}` };
}

/**
 * The report-data slot of `quote`. A development quote is recognized by its
 * magic whatever `teeType` claims (callers must flag it as non-hardware);
 * `sev_snp` selects the SNP layout; anything else must parse as TDX.
 * Throws on malformed evidence.
 */
export function quoteReportDataSlot(teeType: string, quote: Uint8Array): QuoteSlot {
  if (isDevQuote(quote)) {
    return { kind: "dev", slot: parseDevQuote(quote), format: "development quote (no TEE)" };
  }
  if (teeType === "sev_snp") return snpSlot(quote);
  return tdxSlot(quote);
}
