/**
 * The hardware quote check the report verifiers take: DCAP verification of a
 * TDX quote against a collateral source (Intel PCS/PCCS, or a local file for
 * offline use), plus the REPORTDATA comparison. SEV-SNP needs the chip's VCEK
 * from AMD's key distribution service, which this check does not fetch; it
 * says so rather than passing.
 */
import type { QuoteCheck } from "./evidence.ts";
import type { CollateralSource } from "./tdx/collateral_source.ts";
import { verifyTdxQuoteWithSource } from "./tdx/collateral_source.ts";
import { bytesToHex } from "../aci/hex.ts";

export function tdxQuoteCheck(
  opts: { source: CollateralSource; now: () => number; rootCaDer?: Uint8Array },
): QuoteCheck {
  return async (quote, expectedSlot, teeType) => {
    const name = "report.quote_verified";
    if (teeType !== "tdx") {
      return {
        name,
        ok: false,
        detail: `no hardware verifier for tee_type ${JSON.stringify(teeType)} here`,
      };
    }
    const r = await verifyTdxQuoteWithSource(quote, {
      source: opts.source,
      now: opts.now,
      rootCaDer: opts.rootCaDer,
    });
    if (!r.ok) return { name, ok: false, detail: `TDX quote rejected at ${r.stage}: ${r.reason}` };
    const rd = r.reportHex.reportData;
    if (rd !== bytesToHex(expectedSlot)) {
      return {
        name,
        ok: false,
        detail: "quote REPORTDATA does not equal the expected report data",
      };
    }
    return {
      name,
      ok: true,
      detail: `TDX v${r.version} quote verified (TCB ${r.tcbStatus}${
        r.advisoryIds.length ? `, advisories ${r.advisoryIds.join(",")}` : ""
      })`,
    };
  };
}
