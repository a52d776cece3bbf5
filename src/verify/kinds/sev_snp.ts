/**
 * `--kind sev-snp`: an SEV-SNP report as projects record it — raw (1184
 * bytes, or followed by a certificate table), hex, base64 (gzip'd or not), an
 * Azure HCL report (the SNP report at 0x20), JSON `{report, vcek}`, or a
 * dstack SCALE attestation (`{attestation: hex}`, report at byte 4, VCEK
 * embedded as PEM). The VCEK comes from the evidence when it carries one,
 * else from the context (`--vcek`, or the KDS); it must chain to a pinned ARK
 * of the report's product. One check per step.
 */
import { bytesToHex } from "../../aci/mod.ts";
import { type Check, check } from "../checks.ts";
import { isRecord } from "../json_shape.ts";
import { parseSnpReport, SNP_REPORT_LEN, type SnpReport } from "../sev_snp/report.ts";
import { vcekMismatch, verifySnpReport } from "../sev_snp/verify_report.ts";
import { pemCertificatesToDer } from "../x509/pem.ts";
import { asJson, textToBytes } from "./decode.ts";
import type { EvidenceContext, EvidenceKind } from "./types.ts";

function looksLikeReport(b: Uint8Array): boolean {
  if (b.length < SNP_REPORT_LEN) return false;
  const v = b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24);
  return v >= 2 && v <= 5 && b[0x34] === 1; // SIGNATURE_ALGO 1 = ECDSA P-384
}

const HCL_MAGIC = "HCLA";

/** The report inside recorded bytes: at 0, at 0x20 of an HCL report, or at 4 of a dstack SCALE blob. */
function reportIn(b: Uint8Array): Uint8Array | null {
  if (new TextDecoder("latin1").decode(b.subarray(0, 4)) === HCL_MAGIC) {
    const r = b.subarray(0x20, 0x20 + SNP_REPORT_LEN);
    return looksLikeReport(r) ? r : null;
  }
  if (looksLikeReport(b)) return b.subarray(0, SNP_REPORT_LEN);
  if (looksLikeReport(b.subarray(4))) return b.subarray(4, 4 + SNP_REPORT_LEN);
  return null;
}

/** Report bytes and any certificates the evidence carries. */
export function snpFromEvidence(
  input: Uint8Array,
): { report: Uint8Array; certs: Uint8Array[] } | string {
  const json = asJson(input);
  let raw: Uint8Array | null = null;
  let certText = "";
  if (isRecord(json)) {
    const r = json["report"] ?? json["attestation"] ?? json["quote"];
    if (Array.isArray(r)) raw = Uint8Array.from(r.map((x) => Number(x) & 0xff));
    else if (typeof r === "string") raw = textToBytes(r);
    if (typeof json["vcek"] === "string") certText += json["vcek"];
  } else if (json === undefined) {
    raw = reportIn(input) ? input : textToBytes(new TextDecoder().decode(input));
  }
  if (!raw) {
    return "no SEV-SNP report found (raw, hex, base64, HCL, {report, vcek} or {attestation})";
  }
  const report = reportIn(raw);
  if (!report) return "the evidence holds no SEV-SNP report (version 2–5, ECDSA P-384)";
  // Certificates embedded as PEM (dstack's SCALE blob, Azure's vcek field).
  certText += new TextDecoder("latin1").decode(raw);
  return { report: new Uint8Array(report), certs: pemCertificatesToDer(certText) };
}

function facts(r: SnpReport): Check[] {
  const t = r.reportedTcb;
  const tcb = Object.entries(t).map(([k, v]) => `${k}=${v}`).join(" ");
  return [
    check(
      "snp.report",
      true,
      `version ${r.version}, product ${r.product ?? "unnamed (version 2)"}, VMPL ${r.vmpl}, ` +
        `policy 0x${r.policy.toString(16)}`,
    ),
    check("snp.reported_tcb", true, tcb),
    check(
      "snp.measurements",
      true,
      `MEASUREMENT ${bytesToHex(r.measurement)}; HOST_DATA ${bytesToHex(r.hostData)}; ` +
        `REPORT_DATA ${bytesToHex(r.reportData)}`,
    ),
  ];
}

/** Verifies under each pinned root the report may belong to; the first that verifies wins. */
async function signatureCheck(
  bytes: Uint8Array,
  r: SnpReport,
  certs: Uint8Array[],
  ctx: EvidenceContext,
): Promise<Check> {
  const roots = ctx.snp.roots.filter((root) => !r.product || root.product === r.product);
  if (roots.length === 0) {
    return check(
      "snp.signature",
      false,
      `no pinned AMD root for ${r.product ?? "this report"} (--amd-roots)`,
    );
  }
  const reasons: string[] = [];
  for (const root of roots) {
    const candidates = certs.filter((c) => vcekMismatch(c, r, root.product) === null);
    if (candidates.length === 0 && ctx.snp.vcek) {
      try {
        candidates.push(await ctx.snp.vcek.get(r, root.product));
      } catch (e) {
        reasons.push(`${root.product}: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    if (candidates.length === 0 && certs.length > 0) {
      reasons.push(`${root.product}: ${vcekMismatch(certs[0], r, root.product)}`);
    }
    for (const vcekDer of candidates) {
      const v = await verifySnpReport(bytes, {
        vcekDer,
        askDer: root.askDer,
        arkDer: root.arkDer,
        now: () => ctx.at,
        product: root.product,
      });
      if (v.ok) {
        return check(
          "snp.signature",
          true,
          `signed by a VCEK/VLEK chained to the pinned ${root.product} ARK; chain valid until ${
            new Date(v.chainNotAfterMs).toISOString()
          }`,
        );
      }
      reasons.push(`${root.product}: ${v.reason}`);
    }
  }
  return check("snp.signature", false, reasons.join("; ") || "no VCEK for this report");
}

export const sevSnpKind: EvidenceKind = {
  reads: "an SEV-SNP report: raw/hex/base64(gzip), Azure HCL, {report, vcek}, dstack {attestation}",
  verify: async (input, ctx) => {
    const found = snpFromEvidence(input);
    if (typeof found === "string") return [check("snp.input", false, found)];
    const parsed = parseSnpReport(found.report);
    if (!parsed.ok) return [check("snp.report", false, parsed.reason)];
    const r = parsed.report;
    const out = [...facts(r), await signatureCheck(found.report, r, found.certs, ctx)];
    out.push(
      check(
        "snp.debug",
        !r.debugAllowed,
        r.debugAllowed ? "guest policy allows debugging (bit 19): memory is not private" : "off",
      ),
    );
    return out;
  },
};
