/**
 * The hardware check of the gateway's quote for the verifying client: TDX
 * through the DCAP code `task verify` uses (`verify/tdx_quote_check.ts`),
 * SEV-SNP through the VCEK-chain verifier the SNP upstream attester uses
 * (`verify/sev_snp/verify_report.ts`) under the AMD roots the caller pins.
 * Collateral is supplied or fetched (Intel PCS, AMD KDS) with the given fetch.
 */
import { bytesEqual, bytesToHex } from "../aci/hex.ts";
import type { QuoteCheck } from "../verify/evidence.ts";
import { parseSnpReport } from "../verify/sev_snp/report.ts";
import type { SnpTrust } from "../verify/sev_snp/trust.ts";
import { verifySnpReport } from "../verify/sev_snp/verify_report.ts";
import { collateralFromDcapQvlJson } from "../verify/tdx/collateral.ts";
import {
  type CollateralSource,
  INTEL_PCS_BASE_URL,
  PcsCollateralSource,
} from "../verify/tdx/collateral_source.ts";
import { tdxQuoteCheck } from "../verify/tdx_quote_check.ts";

/** Where the trust material for hardware quotes comes from. */
export interface QuoteTrust {
  /** TDX collateral (default: `tdxCollateralJson`, else PCS at `pcsBaseUrl` through `fetch`). */
  tdxCollateral?: CollateralSource;
  /**
   * TDX collateral supplied as JSON in dcap-qvl's shape (what `task verify --collateral` reads):
   * the way for a browser, which Intel's PCS may not serve cross-origin.
   */
  tdxCollateralJson?: unknown;
  /** A PCS or PCCS to fetch TDX collateral from (default: Intel's PCS). */
  pcsBaseUrl?: string;
  /** DER of the root TDX quotes chain to (default: Intel's SGX root CA; tests pin their own). */
  tdxRootCaDer?: Uint8Array;
  /** SEV-SNP: pinned AMD roots (ASK + ARK per product) and a VCEK source; none: SNP fails. */
  snp?: SnpTrust;
  fetch: typeof fetch;
  now: () => number;
}

/** Supplied collateral, whatever FMSPC is asked for (DCAP then checks it is the quote's). */
function jsonCollateral(json: unknown): CollateralSource {
  const parsed = collateralFromDcapQvlJson(json);
  return {
    get: () =>
      parsed.ok
        ? Promise.resolve(parsed.collateral)
        : Promise.reject(new Error(`supplied TDX collateral: ${parsed.reason}`)),
  };
}

/** TDX and SEV-SNP quote verification in one `QuoteCheck`. */
export function hardwareQuoteCheck(t: QuoteTrust): QuoteCheck {
  const tdx = tdxQuoteCheck({
    source: t.tdxCollateral ??
      (t.tdxCollateralJson !== undefined
        ? jsonCollateral(t.tdxCollateralJson)
        : new PcsCollateralSource({
          baseUrl: t.pcsBaseUrl ?? INTEL_PCS_BASE_URL,
          fetch: t.fetch,
          now: t.now,
        })),
    now: t.now,
    rootCaDer: t.tdxRootCaDer,
  });
  return async (quote, expectedSlot, teeType) => {
    if (teeType === "tdx") return await tdx(quote, expectedSlot, teeType);
    const name = "report.quote_verified";
    if (teeType !== "sev_snp") {
      return { name, ok: false, detail: `no hardware verifier for tee_type ${teeType}` };
    }
    const parsed = parseSnpReport(quote);
    if (!parsed.ok) return { name, ok: false, detail: parsed.reason };
    if (!t.snp || t.snp.roots.length === 0) {
      return { name, ok: false, detail: "SEV-SNP report not verified: no AMD roots supplied" };
    }
    const reasons: string[] = [];
    for (const root of t.snp.roots) {
      let vcekDer: Uint8Array;
      try {
        vcekDer = await t.snp.vcek.get(parsed.report, root.product);
      } catch (e) {
        reasons.push(`${root.product}: ${e instanceof Error ? e.message : String(e)}`);
        continue;
      }
      const v = await verifySnpReport(quote, {
        vcekDer,
        askDer: root.askDer,
        arkDer: root.arkDer,
        now: t.now,
      });
      if (!v.ok) {
        reasons.push(`${root.product}: ${v.reason}`);
        continue;
      }
      if (!bytesEqual(v.report.reportData, expectedSlot)) {
        return {
          name,
          ok: false,
          detail: "SNP REPORT_DATA does not equal the expected report data",
        };
      }
      if (v.debugAllowed) {
        return {
          name,
          ok: false,
          detail: "SNP guest policy allows debugging: its memory is not confidential",
        };
      }
      return {
        name,
        ok: true,
        detail: `SEV-SNP report verified under the pinned ${root.product} ARK (measurement ${
          bytesToHex(v.report.measurement)
        })`,
      };
    }
    return { name, ok: false, detail: `SNP report rejected: ${reasons.join("; ")}` };
  };
}
