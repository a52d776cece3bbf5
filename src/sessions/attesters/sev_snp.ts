/**
 * Verifier for AMD SEV-SNP upstreams (`sev-snp/1`): observe the TLS key,
 * fetch the guest's raw SNP report from `GET /v1/attestation/sev-snp?nonce=…`
 * over a channel pinned to that key, verify it through VCEK → ASK → ARK to an
 * operator-pinned root (VCEK from a directory or the KDS), require
 * REPORT_DATA = sha256(SPKI DER) ‖ nonce, refuse debuggable guests, and judge
 * TCB and MEASUREMENT against the operator's policy. The binding is written
 * down in docs/decisions/014-sev-snp-upstreams.md.
 */
import type {
  AttestationOutcome,
  AttestationTarget,
  AttesterDeps,
  Claim,
  SessionDocument,
  UpstreamAttester,
} from "../types.ts";
import {
  parseSnpReport,
  type SnpReport,
  snpReportHex,
  type SnpRoot,
  type SnpTcb,
  type SnpVerified,
  verifySnpReport,
} from "../../verify/mod.ts";
import { bytesEqual, bytesToHex, hexToBytes } from "../../aci/mod.ts";
import { allowListClaim, UNKNOWN } from "./claims.ts";
import { fetchBoundEvidence, sessionEvidence, unixSeconds } from "./endpoint.ts";
import { refuse, runAttestation } from "./outcome.ts";

export const SEV_SNP_ATTESTER_ID = "sev-snp/1";

/** The path (under the base URL's `/v1`) where an SNP upstream serves its report. */
export const SEV_SNP_REPORT_PATH = "/attestation/sev-snp";

/** REPORT_DATA an upstream must put in its report: sha256(SPKI DER) ‖ nonce (64 bytes). */
export function snpReportData(spkiSha256Hex: string, nonceHex: string): Uint8Array {
  const out = new Uint8Array(64);
  out.set(hexToBytes(spkiSha256Hex), 0);
  out.set(hexToBytes(nonceHex), 32);
  return out;
}

const TCB_FIELDS: (keyof SnpTcb)[] = ["fmc", "bootloader", "tee", "snp", "microcode"];

function tcbText(t: SnpTcb): string {
  return TCB_FIELDS.filter((f) => t[f] !== undefined).map((f) => `${f}=${t[f]}`).join(" ");
}

/**
 * `tcb_up_to_date` against the operator's minimum, unknown without one. The
 * FMC minimum applies to Turin reports only (the other products have no FMC).
 */
function tcbClaim(reported: SnpTcb, min: SnpTcb | undefined): Claim {
  if (!min) return UNKNOWN;
  const low = TCB_FIELDS.filter((f) =>
    reported[f] !== undefined && min[f] !== undefined && reported[f]! < min[f]!
  );
  return {
    status: low.length === 0 ? "asserted" : "refuted",
    source: "verifier_derived",
    reason: `REPORTED_TCB ${tcbText(reported)}; minimum ${tcbText(min)}` +
      (low.length ? `; below in ${low.join(",")}` : ""),
  };
}

/** Tries each pinned product root; the first under which the report verifies wins. */
async function verifyUnderRoots(
  bytes: Uint8Array,
  report: SnpReport,
  deps: AttesterDeps,
  nowMs: number,
): Promise<{ verified: SnpVerified; root: SnpRoot }> {
  const trust = deps.sevSnp;
  if (!trust || trust.roots.length === 0) refuse("no AMD roots are pinned (trust.sev_snp.roots)");
  const reasons: string[] = [];
  // A version ≥ 3 report names its product: only that product's root can sign it.
  const roots = report.product
    ? trust.roots.filter((r) => r.product === report.product)
    : trust.roots;
  if (roots.length === 0) {
    refuse(`SNP report is from a ${report.product} CPU; no ${report.product} root is pinned`);
  }
  for (const root of roots) {
    let vcekDer: Uint8Array;
    try {
      vcekDer = await trust.vcek.get(report, root.product);
    } catch (e) {
      reasons.push(`${root.product}: ${e instanceof Error ? e.message : String(e)}`);
      continue;
    }
    const v = await verifySnpReport(bytes, {
      vcekDer,
      askDer: root.askDer,
      arkDer: root.arkDer,
      now: () => nowMs,
      product: root.product,
    });
    if (v.ok) return { verified: v, root };
    reasons.push(`${root.product}: ${v.reason}`);
  }
  refuse(`SNP report rejected: ${reasons.join("; ")}`);
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function verify(target: AttestationTarget, deps: AttesterDeps): Promise<AttestationOutcome> {
  const { conf, origin, tls, nonce, bytes } = await fetchBoundEvidence(target, deps, {
    path: SEV_SNP_REPORT_PATH,
    query: (nonce) => ({ nonce }),
    what: "SNP report",
  });
  const policy = conf.sev_snp;
  // The VCEK lookup needs CHIP_ID and REPORTED_TCB before the signature can be checked.
  const parsed = parseSnpReport(bytes);
  if (!parsed.ok) refuse(parsed.reason);
  const nowMs = deps.now();
  const { verified, root } = await verifyUnderRoots(bytes, parsed.report, deps, nowMs);
  const r = verified.report;

  if (!bytesEqual(r.reportData, snpReportData(tls.spkiSha256, nonce))) {
    refuse(
      "SNP REPORT_DATA does not bind the observed TLS key and the fresh nonce " +
        "(expected sha256(SPKI DER) ‖ nonce)",
    );
  }
  if (r.debugAllowed) {
    refuse("SNP guest policy allows debugging (POLICY bit 19): memory is not private");
  }

  const tcbUpToDate = tcbClaim(r.reportedTcb, policy?.min_tcb);
  if (policy?.require_min_tcb && tcbUpToDate.status === "refuted") {
    refuse(`SNP TCB policy: ${tcbUpToDate.reason}`);
  }

  const nowS = unixSeconds(nowMs);
  const expiresAt = Math.min(
    nowS + conf.session_ttl_seconds,
    unixSeconds(verified.chainNotAfterMs),
  );
  if (expiresAt <= nowS) refuse("the VCEK chain expires before a session could start");
  const hex = snpReportHex(r);
  const document: SessionDocument = {
    api_version: "aci/1",
    upstream_name: target.name,
    endpoint: origin,
    verifier_id: SEV_SNP_ATTESTER_ID,
    established_at: nowS,
    expires_at: expiresAt,
    identity: { measurement: hex.measurement, host_data: hex.hostData },
    channel_binding: [{ type: "tls_spki_sha256", origin, spki_sha256: tls.spkiSha256 }],
    claims: {
      tee_attested: {
        status: "asserted",
        source: "hardware_proven",
        reason: `SEV-SNP report v${r.version} signed by a VCEK chained to the pinned AMD ARK ` +
          `(${root.product}); REPORT_DATA binds the observed TLS key and a fresh nonce`,
      },
      tcb_up_to_date: tcbUpToDate,
      os_known_good: allowListClaim(
        policy?.allowed_measurements ?? [],
        hex.measurement,
        "SNP MEASUREMENT",
      ),
      serving_software_known_good: UNKNOWN,
      gpu_attested: UNKNOWN,
      model_weights_provenance: UNKNOWN,
      extra: {
        snp_report: {
          product: root.product,
          version: r.version,
          measurement: hex.measurement,
          host_data: hex.hostData,
          id_key_digest: bytesToHex(r.idKeyDigest),
          author_key_digest: bytesToHex(r.authorKeyDigest),
          chip_id: hex.chipId,
          policy: `0x${r.policy.toString(16)}`,
          vmpl: r.vmpl,
          guest_svn: r.guestSvn,
          reported_tcb: { ...r.reportedTcb },
          current_tcb: { ...r.currentTcb },
        },
      },
    },
    evidence: sessionEvidence("application/octet-stream", bytes),
  };
  return { ok: true, document, spkiSha256: tls.spkiSha256 };
}

/** The SEV-SNP verifier. */
export const sevSnpAttester: UpstreamAttester = {
  id: SEV_SNP_ATTESTER_ID,
  verify: (target, deps) => runAttestation(() => verify(target, deps)),
};
