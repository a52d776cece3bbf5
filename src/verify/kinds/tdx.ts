/**
 * `--kind tdx`: a TDX quote (binary, hex, base64, or JSON holding one under
 * `quote`, `intel_quote`, `td_quote` or `tdx.quote`), DCAP-verified at the
 * given instant under the TDX policy: one check per stage, then the
 * measurements.
 */
import { bytesToHex } from "../../aci/mod.ts";
import { type Check, check } from "../checks.ts";
import { isRecord } from "../json_shape.ts";
import { verifyTdxQuoteWithSource } from "../tdx/collateral_source.ts";
import type { TdxVerified, TdxVerifyStage } from "../tdx/dcap.ts";
import { asJson, binaryOrText, textToBytes } from "./decode.ts";
import type { EvidenceContext, EvidenceKind } from "./types.ts";

/** A quote's first bytes: version 4 or 5 (u16 LE), attestation key type 2 (ECDSA P-256). */
function looksLikeQuote(b: Uint8Array): boolean {
  return b.length > 48 && (b[0] === 4 || b[0] === 5) && b[1] === 0 && b[2] === 2 && b[3] === 0;
}

/** The quote in a JSON document of the usual shapes, as text. */
function quoteField(doc: unknown): string | null {
  if (!isRecord(doc)) return null;
  for (const k of ["quote", "intel_quote", "td_quote"]) {
    if (typeof doc[k] === "string") return doc[k] as string;
  }
  const tdx = doc["tdx"];
  return isRecord(tdx) && typeof tdx["quote"] === "string" ? tdx["quote"] : null;
}

/** The quote bytes of a recorded TDX evidence file, or why there are none. */
export function quoteFromEvidence(input: Uint8Array): Uint8Array | string {
  const json = asJson(input);
  if (json !== undefined) {
    const text = quoteField(json);
    if (text === null) return "no quote, intel_quote, td_quote or tdx.quote field in the JSON";
    return textToBytes(text) ?? "the quote field is neither hex nor base64";
  }
  return binaryOrText(input, looksLikeQuote) ?? "not a TDX quote (binary, hex or base64)";
}

const PASSED_BEFORE: Record<TdxVerifyStage, string[]> = {
  parse: [],
  header: ["parse"],
  pck_chain: ["parse", "header"],
  qe_report: ["parse", "header", "pck_chain"],
  quote_signature: ["parse", "header", "pck_chain", "qe_report"],
  collateral: ["parse", "header", "pck_chain", "qe_report", "quote_signature"],
  qe_identity: ["parse", "header", "pck_chain", "qe_report", "quote_signature", "collateral"],
  tcb: [
    "parse",
    "header",
    "pck_chain",
    "qe_report",
    "quote_signature",
    "collateral",
    "qe_identity",
  ],
  td_policy: [
    "parse",
    "header",
    "pck_chain",
    "qe_report",
    "quote_signature",
    "collateral",
    "qe_identity",
    "tcb",
  ],
};

/** The checks of a verified quote, stage by stage. */
function verifiedChecks(v: TdxVerified, ctx: EvidenceContext): Check[] {
  const h = v.reportHex;
  const accepted = ctx.tdx.tcbPolicy?.accepted;
  return [
    check("tdx.quote", true, `TDX v${v.version}, FMSPC ${v.fmspc}`),
    check("tdx.pck_chain", true, "PCK chain to the pinned Intel root, CRLs checked"),
    check("tdx.signatures", true, "QE report and quote signatures valid"),
    check(
      "tdx.collateral",
      true,
      `TCB Info and QE Identity signed and current; valid until ${
        new Date(v.collateralExpiresAt * 1000).toISOString()
      }`,
    ),
    check(
      "tdx.tcb",
      true,
      `TCB status ${v.tcbStatus}; advisories: ${v.advisoryIds.join(",") || "none"}` +
        (v.tdxModuleId ? `; module ${v.tdxModuleId}` : "") +
        (accepted ? `; accepted by the policy (${accepted.join(", ")})` : ""),
    ),
    check(
      "tdx.td_attributes",
      true,
      v.tdPolicy.septVeWaived
        ? "DEBUG 0; SEPT_VE_DISABLE 0 accepted by the operator's opt-in"
        : "DEBUG 0, SEPT_VE_DISABLE 1",
    ),
    check(
      "tdx.measurements",
      true,
      `MRTD ${h.mrTd}; RTMR0 ${h.rtmr0}; RTMR1 ${h.rtmr1}; RTMR2 ${h.rtmr2}; RTMR3 ${h.rtmr3}; ` +
        `REPORTDATA ${bytesToHex(v.report.reportData)}`,
    ),
  ];
}

/** DCAP verification of quote bytes as checks; the verified quote when it passed. */
export async function tdxChecks(
  quote: Uint8Array,
  ctx: EvidenceContext,
): Promise<{ checks: Check[]; verified: TdxVerified | null }> {
  const r = await verifyTdxQuoteWithSource(quote, {
    source: ctx.tdx.source,
    now: () => ctx.at,
    rootCaDer: ctx.tdx.rootCaDer,
    tcbPolicy: ctx.tdx.tcbPolicy,
    allowSeptVeEnabled: ctx.tdx.allowSeptVeEnabled,
  });
  if (r.ok) return { checks: verifiedChecks(r, ctx), verified: r };
  const passed = PASSED_BEFORE[r.stage].map((s) => check(`tdx.${s}`, true, "passed"));
  return { checks: [...passed, check(`tdx.${r.stage}`, false, r.reason)], verified: null };
}

export const tdxKind: EvidenceKind = {
  reads: "a TDX quote: binary, hex or base64, or JSON with quote / intel_quote / tdx.quote",
  verify: async (input, ctx) => {
    const quote = quoteFromEvidence(input);
    if (typeof quote === "string") return [check("tdx.input", false, quote)];
    return (await tdxChecks(quote, ctx)).checks;
  },
};
