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
import type { TdxTcbPolicy } from "./tdx/tcb_policy.ts";

/** Where collateral comes from, the clock, the pinned root and the provider's TDX policy. */
export interface TdxQuoteCheckOptions {
  source: CollateralSource;
  now: () => number;
  rootCaDer?: Uint8Array;
  tcbPolicy?: TdxTcbPolicy;
  allowSeptVeEnabled?: boolean;
}

export function tdxQuoteCheck(opts: TdxQuoteCheckOptions): QuoteCheck {
  return async (quote, expectedSlot, teeType) => {
    const name = "report.quote_verified";
    if (teeType !== "tdx") {
      return {
        name,
        ok: false,
        detail: `no hardware verifier for tee_type ${JSON.stringify(teeType)} here`,
      };
    }
    const r = await verifyTdxQuoteWithSource(quote, opts);
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
