/**
 * Offline re-verification of a session an evidence bundle cites, with the
 * collateral its verification consumed (archived with the session, bound to
 * it by `claims.extra.collateral.digest`): the recorded evidence's TDX quote
 * DCAP-verified with the archived TCB info, QE identity, CRLs and chains to
 * the auditor's pinned Intel root; the quote's measurements against the
 * session's claims; a dstack event log replayed; an SEV-SNP report chained
 * through the archived VCEK to the auditor's pinned AMD roots; the GPU
 * evidence with the archived RIMs and OCSP answers. All at one instant: the
 * auditor's `--at`, else the verification's own time (GPU artefacts: the
 * times recorded with them). Nothing is fetched.
 */
import { createHash } from "node:crypto";
import { bytesEqual, bytesToHex, parseHex } from "../aci/mod.ts";
import { type Check, check } from "./checks.ts";
import { archiveDigest, archiveSources } from "./collateral_archive.ts";
import { verifyEventLog } from "./dstack/event_log.ts";
import { isRecord } from "./json_shape.ts";
import { sevSnpKind, snpFromEvidence } from "./kinds/sev_snp.ts";
import { parseSnpReport } from "./sev_snp/report.ts";
import { quoteFromEvidence, tdxChecks } from "./kinds/tdx.ts";
import type { EvidenceContext } from "./kinds/types.ts";
import { asJson } from "./kinds/decode.ts";
import { sameTime } from "./nvidia/deps.ts";
import { StaticGpuCollateral } from "./nvidia/collateral.ts";
import { verifySessionGpu } from "./session_gpu.ts";
import type { SnpRoot } from "./sev_snp/trust.ts";
import type { TdxTcbPolicy } from "./tdx/tcb_policy.ts";

/** What the auditor pins, and the instant they chose. */
export interface OfflineTrust {
  /** `--at` (epoch ms), or undefined: each item at its own verification time. */
  at?: number;
  /** The Intel root to chain TDX collateral to; default the real Intel SGX Root CA. */
  tdxRootCaDer?: Uint8Array;
  tcbPolicy?: TdxTcbPolicy;
  allowSeptVeEnabled?: boolean;
  /** AMD ASK/ARK pairs (`--amd-roots`). */
  snpRoots: readonly SnpRoot[];
  /** NVIDIA device and RIM roots. */
  gpuRoots: { deviceRootDer: Uint8Array; rimRootDer: Uint8Array };
  allowDevEvidence?: boolean;
}

/** The collateral entry of a bundle: `{digest, archive}` or `{none: reason}`. */
export type BundleCollateral = unknown;

function evidenceBytes(doc: Record<string, unknown>): Uint8Array | null {
  const ev = doc.evidence;
  if (!isRecord(ev) || typeof ev.data !== "string") return null;
  const m = /^data:[^;,]+;base64,(.*)$/.exec(ev.data);
  if (!m) return null;
  try {
    const bytes = Uint8Array.from(atob(m[1]), (c) => c.charCodeAt(0));
    const digest = "sha256:" + createHash("sha256").update(bytes).digest("hex");
    return digest === ev.digest ? bytes : null;
  } catch {
    return null;
  }
}

const claimsExtra = (doc: Record<string, unknown>): Record<string, unknown> => {
  const claims = isRecord(doc.claims) ? doc.claims : {};
  return isRecord(claims.extra) ? claims.extra : {};
};

/** The archive a session's document commits to, checked against the bundle's entry. */
function sessionArchive(
  doc: Record<string, unknown>,
  entry: BundleCollateral,
): { checks: Check[]; archive: unknown | null } {
  const bound = claimsExtra(doc).collateral;
  const want = isRecord(bound) && typeof bound.digest === "string" ? bound.digest : null;
  if (want === null) {
    const why = isRecord(entry) && typeof entry.none === "string" ? entry.none : "none archived";
    return { checks: [check("session.collateral", true, `no collateral: ${why}`)], archive: null };
  }
  const archive = isRecord(entry) ? entry.archive : undefined;
  let got: string | null = null;
  try {
    got = archive === undefined ? null : archiveDigest(archive as never);
  } catch { /* not JCS-able: not the archive */ }
  const ok = got === want;
  return {
    checks: [
      check(
        "session.collateral",
        ok,
        ok
          ? `the archived collateral hashes to ${want}, the digest the session document commits to`
          : got === null
          ? `the session commits to collateral ${want}, which the bundle does not hold`
          : `the bundle's collateral hashes to ${got}, not ${want} (altered)`,
      ),
    ],
    archive: ok ? archive : null,
  };
}

/**
 * dstack report data v2: the quote's first 32 REPORTDATA bytes are
 * sha256(signing address ‖ sha256(SPKI)) of the identity and TLS key the
 * session names (the second half is the gateway's nonce, fresh only then).
 */
function tlsBinding(doc: Record<string, unknown>, reportData: Uint8Array): Check[] {
  const identity = isRecord(doc.identity) ? doc.identity : {};
  const address = typeof identity.signing_address === "string"
    ? parseHex(identity.signing_address.replace(/^0x/, ""))
    : null;
  const binding = Array.isArray(doc.channel_binding)
    ? doc.channel_binding.find((b) => isRecord(b) && b.type === "tls_spki_sha256")
    : undefined;
  const spki = isRecord(binding) && typeof binding.spki_sha256 === "string"
    ? parseHex(binding.spki_sha256)
    : null;
  if (address === null || spki === null) return [];
  const want = createHash("sha256").update(address).update(spki).digest();
  const ok = bytesEqual(new Uint8Array(want), reportData.subarray(0, 32));
  return [
    check(
      "session.tls_binding",
      ok,
      ok
        ? "the quote's REPORTDATA binds the session's signing address and TLS key (report data v2)"
        : "the quote's REPORTDATA does not bind the session's signing address and TLS key",
    ),
  ];
}

/** An SNP session's report: its measurement is the session's, its REPORT_DATA binds the TLS key. */
function snpAgainstSession(doc: Record<string, unknown>, bytes: Uint8Array): Check[] {
  const found = snpFromEvidence(bytes);
  const parsed = typeof found === "string" ? null : parseSnpReport(found.report);
  if (parsed === null || !parsed.ok) return [check("session.sev_snp", false, "no report")];
  const r = parsed.report;
  const identity = isRecord(doc.identity) ? doc.identity : {};
  const measured = bytesToHex(r.measurement);
  const binding = Array.isArray(doc.channel_binding)
    ? doc.channel_binding.find((b) => isRecord(b) && b.type === "tls_spki_sha256")
    : undefined;
  const spki = isRecord(binding) ? binding.spki_sha256 : undefined;
  const bound = bytesToHex(r.reportData.subarray(0, 32));
  return [
    check(
      "session.measurements",
      identity.measurement === measured,
      identity.measurement === measured
        ? `the report's MEASUREMENT ${measured} is the one the session names`
        : "the report's MEASUREMENT differs from the session's",
    ),
    check(
      "session.tls_binding",
      spki === bound,
      spki === bound
        ? "the report's REPORT_DATA binds the session's TLS key"
        : "the report's REPORT_DATA does not bind the session's TLS key",
    ),
  ];
}

/** Re-verifies one session offline; one named check per step, never throws. */
export async function verifySessionOffline(
  doc: unknown,
  entry: BundleCollateral,
  trust: OfflineTrust,
): Promise<Check[]> {
  if (!isRecord(doc)) return [check("session.document", false, "missing")];
  const verifier = String(doc.verifier_id);
  if (verifier.startsWith("dev-")) {
    return [
      check(
        "session.evidence",
        trust.allowDevEvidence === true,
        trust.allowDevEvidence
          ? "WARNING: development session (no TEE, no collateral): accepted only because " +
            "development evidence was explicitly allowed"
          : "development session: no TEE evidence, nothing proves the upstream",
      ),
    ];
  }
  const { checks, archive } = sessionArchive(doc, entry);
  const tdxLike = verifier.startsWith("dstack-tdx/");
  const snp = verifier.startsWith("sev-snp/");
  if (!tdxLike && !snp) {
    checks.push(
      check(
        "session.evidence",
        true,
        `WARNING: ${verifier} evidence is not re-verified offline by this tool: the bundle ` +
          "shows the session the gateway recorded (hashing to its logged id), not a fresh check",
      ),
    );
    return checks;
  }
  if (archive === null && checks.some((c) => !c.ok)) return checks;
  const sources = archive === null ? null : archiveSources(archive);
  if (typeof sources === "string") {
    checks.push(check("session.collateral", false, sources));
    return checks;
  }
  const bytes = evidenceBytes(doc);
  if (bytes === null) {
    checks.push(check("session.evidence", false, "evidence data missing or not its digest"));
    return checks;
  }
  const established = typeof doc.established_at === "number" ? doc.established_at * 1000 : 0;
  const at = trust.at ?? established;
  const ctx: EvidenceContext = {
    at,
    tdx: {
      source: sources?.tdx ?? { get: () => Promise.reject(new Error("no archived collateral")) },
      rootCaDer: trust.tdxRootCaDer,
      tcbPolicy: trust.tcbPolicy,
      allowSeptVeEnabled: trust.allowSeptVeEnabled,
    },
    snp: { roots: trust.snpRoots, ...(sources ? { vcek: sources.vcek } : {}) },
    gpu: {
      ...trust.gpuRoots,
      collateral: sources?.gpu ?? new StaticGpuCollateral(),
      times: () => sameTime(at),
    },
  };
  const prefix = (cs: Check[]) => cs.map((c) => ({ ...c, name: `session.${c.name}` }));
  if (snp) {
    const kind = await sevSnpKind.verify(bytes, ctx);
    checks.push(...prefix(kind));
    if (kind.every((c) => c.ok)) checks.push(...snpAgainstSession(doc, bytes));
    return checks;
  }
  const quote = quoteFromEvidence(bytes);
  if (typeof quote === "string") {
    checks.push(check("session.tdx.input", false, quote));
    return checks;
  }
  const tdx = await tdxChecks(quote, ctx);
  checks.push(...prefix(tdx.checks));
  const h = tdx.verified?.reportHex;
  const claimed = claimsExtra(doc).tdx_measurements;
  // The GPU evidence is checked below even when the quote failed: an auditor sees every fault.
  if (tdx.verified && h && isRecord(claimed)) {
    const quoted: Record<string, string> = {
      mr_td: h.mrTd,
      rtmr0: h.rtmr0,
      rtmr1: h.rtmr1,
      rtmr2: h.rtmr2,
      rtmr3: h.rtmr3,
    };
    const same = Object.entries(quoted).every(([k, v]) => claimed[k] === v);
    checks.push(
      check(
        "session.measurements",
        same,
        same
          ? `the quote's MRTD ${h.mrTd} and RTMRs are the ones the session claims (judged at ${
            new Date(at).toISOString()
          }, ${trust.at === undefined ? "the session's verification time" : "--at"})`
          : "the quote's measurements differ from the session's claims",
      ),
    );
    checks.push(...tlsBinding(doc, tdx.verified.report.reportData));
    const report = asJson(bytes);
    const log = isRecord(report) ? report.event_log : undefined;
    if (claimed.event_log_replayed === true) {
      const replay = log === undefined || log === null
        ? { ok: false as const, reason: "the session says its event log was replayed; none" }
        : verifyEventLog(log, tdx.verified.report.rtmrs);
      checks.push(
        check(
          "session.event_log",
          replay.ok,
          replay.ok
            ? `event log replays to RTMR0–3 (compose hash ${replay.composeHash ?? "none"})`
            : replay.reason,
        ),
      );
    }
  }
  const gpu = isRecord(doc.claims) && isRecord(doc.claims.gpu_attested)
    ? doc.claims.gpu_attested
    : {};
  if (gpu.status === "asserted" && gpu.source === "hardware_proven") {
    // Without --at, each GPU artefact at the time it was judged (OCSP windows are short).
    const times = trust.at === undefined && sources?.gpuTimes ? sources.gpuTimes : sameTime(at);
    const gpuChecks = await verifySessionGpu(doc, { ...ctx.gpu, times: () => times }, at);
    checks.push(...prefix(gpuChecks.filter((c) => c.name !== "session.evidence")));
  }
  return checks;
}
