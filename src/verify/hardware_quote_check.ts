/**
 * The report verifiers' hardware check for both TEEs a gateway runs in: TDX
 * quotes through DCAP (`tdx_quote_check.ts`), SEV-SNP reports through the
 * VCEK chain to a pinned ARK of the report's product (VCEK from the
 * evidence context's source: `--vcek`, a directory, or the KDS), then the
 * report data against the expected value.
 */
import { bytesEqual } from "../aci/mod.ts";
import { check } from "./checks.ts";
import type { QuoteCheck } from "./evidence.ts";
import type { EvidenceContext } from "./kinds/types.ts";
import { parseSnpReport } from "./sev_snp/report.ts";
import { verifySnpReport } from "./sev_snp/verify_report.ts";
import { tdxQuoteCheck } from "./tdx_quote_check.ts";

/** SEV-SNP: chain, signature and REPORT_DATA; never throws. */
function snpQuoteCheck(ctx: EvidenceContext): QuoteCheck {
  return async (report, expectedSlot) => {
    const name = "report.quote_verified";
    const parsed = parseSnpReport(report);
    if (!parsed.ok) return check(name, false, parsed.reason);
    const r = parsed.report;
    const roots = ctx.snp.roots.filter((root) => !r.product || root.product === r.product);
    if (roots.length === 0) {
      return check(name, false, `no pinned AMD root for ${r.product ?? "this report"}`);
    }
    if (!ctx.snp.vcek) return check(name, false, "no VCEK source (give --vcek or a KDS)");
    const reasons: string[] = [];
    for (const root of roots) {
      let vcekDer: Uint8Array;
      try {
        vcekDer = await ctx.snp.vcek.get(r, root.product);
      } catch (e) {
        reasons.push(`${root.product}: ${e instanceof Error ? e.message : String(e)}`);
        continue;
      }
      const v = await verifySnpReport(report, {
        vcekDer,
        askDer: root.askDer,
        arkDer: root.arkDer,
        now: () => ctx.at,
        product: root.product,
      });
      if (!v.ok) {
        reasons.push(`${root.product}: ${v.reason}`);
        continue;
      }
      if (!bytesEqual(r.reportData, expectedSlot)) {
        return check(name, false, "report REPORT_DATA does not equal the expected report data");
      }
      if (r.debugAllowed) {
        return check(name, false, "guest policy allows debugging (POLICY bit 19)");
      }
      return check(
        name,
        true,
        `SEV-SNP report v${r.version} signed by a VCEK chained to the pinned ${root.product} ARK`,
      );
    }
    return check(name, false, reasons.join("; "));
  };
}

/** TDX or SEV-SNP by the report's `tee_type`. */
export function hardwareQuoteCheck(ctx: EvidenceContext): QuoteCheck {
  const tdx = tdxQuoteCheck({
    source: ctx.tdx.source,
    now: () => ctx.at,
    rootCaDer: ctx.tdx.rootCaDer,
    tcbPolicy: ctx.tdx.tcbPolicy,
    allowSeptVeEnabled: ctx.tdx.allowSeptVeEnabled,
  });
  const snp = snpQuoteCheck(ctx);
  return (quote, expectedSlot, teeType) =>
    teeType === "sev_snp" ? snp(quote, expectedSlot, teeType) : tdx(quote, expectedSlot, teeType);
}
