/**
 * Verifier for Tinfoil enclaves: observe the TLS key, fetch the enclave's
 * attestation (`/.well-known/tinfoil-attestation`: a bare `{format, body}`
 * document or an attestation bundle) over a channel pinned to that key,
 * verify the report (TDX: DCAP to the pinned Intel root; SEV-SNP: the VCEK
 * — from the bundle or the configured VCEK source — to a pinned AMD root),
 * require REPORTDATA[0:32] to be this TLS key's SPKI digest, record the
 * HPKE key of REPORTDATA[32:64], and require the enclave's measurement to be
 * the one the configured repository published for a release through
 * Sigstore, verified offline against the configured trusted root
 * (verify/sigstore/release.ts). The release bundle comes with the evidence
 * or, for a bare document, from the configuration.
 */
import { createHash } from "node:crypto";
import type {
  AttestationOutcome,
  AttestationTarget,
  AttesterDeps,
  SessionDocument,
  UpstreamAttester,
} from "../types.ts";
import { hexToBytes, isDevQuote } from "../../aci/mod.ts";
import {
  matchRelease,
  parseSnpReport,
  parseTinfoilEvidence,
  snpReportHex,
  tinfoilBinding,
  type TinfoilEvidence,
  verifyReleaseBundle,
  verifySnpReport,
  verifyTdxQuoteWithSource,
} from "../../verify/mod.ts";
import { allowListClaim, tcbUpToDateClaim, UNKNOWN } from "./claims.ts";
import {
  confidentialOf,
  fetchEvidence,
  parseJsonObject,
  sessionEvidence,
  unixSeconds,
  upstreamOrigin,
} from "./endpoint.ts";
import { refuse, runAttestation } from "./outcome.ts";

export const TINFOIL_ATTESTER_ID = "tinfoil/1";

interface Measured {
  reportData: Uint8Array;
  subject: Record<string, unknown>;
  teeReason: string;
  tcb: SessionDocument["claims"]["tcb_up_to_date"];
  validUntil: Record<string, number>;
  registers: { snpMeasurement?: string; rtmr1?: string; rtmr2?: string; mrtd?: string };
}

async function measureTdx(
  ev: TinfoilEvidence,
  deps: AttesterDeps,
  nowMs: number,
): Promise<Measured> {
  const quote = ev.document.report;
  if (isDevQuote(quote)) refuse("the attestation is development evidence (no TEE)");
  const tdx = await verifyTdxQuoteWithSource(quote, {
    source: deps.tdx.collateral,
    now: () => nowMs,
    rootCaDer: deps.tdx.rootCaDer,
  });
  if (!tdx.ok) refuse(`TDX quote rejected at ${tdx.stage}: ${tdx.reason}`);
  const r = tdx.reportHex;
  return {
    reportData: tdx.report.reportData,
    subject: {
      mrtd: r.mrTd,
      rtmr0: r.rtmr0,
      rtmr1: r.rtmr1,
      rtmr2: r.rtmr2,
      rtmr3: r.rtmr3,
      tcb_status: tdx.tcbStatus,
    },
    teeReason:
      `TDX v${tdx.version} quote verified (DCAP chain to the pinned root, FMSPC ${tdx.fmspc})`,
    tcb: tcbUpToDateClaim(tdx.tcbStatus, tdx.advisoryIds),
    validUntil: { tdx_collateral: tdx.collateralExpiresAt },
    registers: { rtmr1: r.rtmr1, rtmr2: r.rtmr2, mrtd: r.mrTd },
  };
}

async function measureSnp(
  ev: TinfoilEvidence,
  deps: AttesterDeps,
  nowMs: number,
): Promise<Measured> {
  const trust = deps.sevSnp;
  if (!trust || trust.roots.length === 0) refuse("no AMD roots are pinned (trust.sev_snp.roots)");
  const parsed = parseSnpReport(ev.document.report);
  if (!parsed.ok) refuse(parsed.reason);
  const reasons: string[] = [];
  for (const root of trust.roots) {
    let vcekDer = ev.vcekDer;
    if (vcekDer === null) {
      try {
        vcekDer = await trust.vcek.get(parsed.report, root.product);
      } catch (e) {
        reasons.push(`${root.product}: ${e instanceof Error ? e.message : String(e)}`);
        continue;
      }
    }
    const v = await verifySnpReport(ev.document.report, {
      vcekDer,
      askDer: root.askDer,
      arkDer: root.arkDer,
      now: () => nowMs,
    });
    if (!v.ok) {
      reasons.push(`${root.product}: ${v.reason}`);
      continue;
    }
    if (v.debugAllowed) refuse("the SEV-SNP guest policy allows debugging");
    const hex = snpReportHex(v.report);
    return {
      reportData: v.report.reportData,
      subject: {
        snp_measurement: hex.measurement,
        snp_host_data: hex.hostData,
        product: root.product,
      },
      teeReason: `SEV-SNP v${v.report.version} report verified (VCEK chained to the pinned ` +
        `${root.product} ARK)`,
      tcb: UNKNOWN,
      validUntil: { vcek_chain: Math.floor(v.chainNotAfterMs / 1000) },
      registers: { snpMeasurement: hex.measurement },
    };
  }
  refuse(`SNP report rejected: ${reasons.join("; ")}`);
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function verify(target: AttestationTarget, deps: AttesterDeps): Promise<AttestationOutcome> {
  const conf = confidentialOf(target);
  const tf = conf.tinfoil;
  if (!tf) {
    refuse("the tinfoil verifier needs confidential.tinfoil (release repository, trusted root)");
  }
  const origin = upstreamOrigin(target.baseUrl);
  const tls = await deps.observeTls(origin, conf.tls_ca_pem);
  const bytes = await fetchEvidence(
    deps.pinnedFetch(tls.spkiSha256, conf.tls_ca_pem),
    new URL(tf.attestation_path, origin).toString(),
    "Tinfoil attestation",
  );
  const parsed = parseTinfoilEvidence(parseJsonObject(bytes, "Tinfoil attestation"));
  if (!parsed.ok) refuse(parsed.reason);
  const ev = parsed.evidence;
  const nowMs = deps.now();
  const m = ev.document.platform === "tdx"
    ? await measureTdx(ev, deps, nowMs)
    : await measureSnp(ev, deps, nowMs);

  const binding = tinfoilBinding(m.reportData);
  if (!binding.ok) refuse(binding.reason);
  if (binding.tlsFingerprint !== tls.spkiSha256.toLowerCase()) {
    refuse(
      `REPORTDATA binds TLS key ${binding.tlsFingerprint}, but this connection's key is ` +
        tls.spkiSha256,
    );
  }

  const bundleJson = ev.sigstoreBundle ??
    (tf.release_bundle_json
      ? parseJsonObject(new TextEncoder().encode(tf.release_bundle_json), "release bundle")
      : null);
  if (bundleJson === null) refuse("no Sigstore release bundle (served or configured)");
  let trustedRoot: unknown;
  try {
    trustedRoot = JSON.parse(tf.trusted_root_json);
  } catch {
    refuse("confidential.tinfoil.trusted_root_json is not JSON");
  }
  const release = verifyReleaseBundle(bundleJson, trustedRoot, {
    repo: tf.repo,
    oidcIssuer: tf.oidc_issuer,
    workflowRefPrefix: tf.workflow_ref_prefix,
  }, ev.releaseDigest ?? undefined);
  if (!release.ok) refuse(`release measurement (${release.code}): ${release.reason}`);
  const same = matchRelease(ev.document.platform, m.registers, release.registers);
  if (!same.ok) refuse(same.reason);

  const nowS = unixSeconds(nowMs);
  const validUntil = Math.min(...Object.values(m.validUntil));
  const expiresAt = Math.min(nowS + conf.session_ttl_seconds, validUntil);
  if (expiresAt <= nowS) {
    refuse("the evidence's collateral or certificates expire before a session");
  }
  const hpkeSha = createHash("sha256").update(hexToBytes(binding.hpkePublicKey)).digest("hex");
  const document: SessionDocument = {
    api_version: "aci/1",
    upstream_name: target.name,
    endpoint: origin,
    verifier_id: TINFOIL_ATTESTER_ID,
    established_at: nowS,
    expires_at: expiresAt,
    identity: {
      platform: ev.document.platform,
      hpke_public_key: binding.hpkePublicKey,
      release_repo: tf.repo,
      release_digest: release.subjectDigest,
    },
    channel_binding: [
      { type: "tls_spki_sha256", origin, spki_sha256: tls.spkiSha256 },
      {
        type: "e2ee_public_key_sha256",
        provider: "tinfoil-ehbp",
        algorithm: "hpke-x25519",
        public_key_sha256: hpkeSha,
      },
    ],
    claims: {
      tee_attested: {
        status: "asserted",
        source: "hardware_proven",
        reason: `${m.teeReason}; REPORTDATA binds this TLS key and the enclave's HPKE key`,
      },
      tcb_up_to_date: m.tcb,
      os_known_good: m.registers.mrtd
        ? allowListClaim(conf.allowed_mrtd, m.registers.mrtd, "MRTD")
        : UNKNOWN,
      serving_software_known_good: {
        status: "asserted",
        source: "verifier_derived",
        reason: `measurement equals release ${release.subjectDigest} of ${tf.repo}, signed ` +
          `through Sigstore by ${release.signerUri} (Rekor ${release.integratedTime})`,
      },
      gpu_attested: UNKNOWN,
      model_weights_provenance: UNKNOWN,
      extra: {
        measured_subjects: { upstream: m.subject },
        release: {
          repo: tf.repo,
          predicate_type: release.predicateType,
          subject: release.subjectName,
          digest: release.subjectDigest,
          signer: release.signerUri,
          rekor_integrated_time: release.integratedTime,
          registers: release.registers,
        },
        evidence_validity: m.validUntil,
      },
    },
    evidence: sessionEvidence("application/json", bytes),
  };
  return { ok: true, document, spkiSha256: tls.spkiSha256 };
}

/** The Tinfoil verifier. */
export const tinfoilAttester: UpstreamAttester = {
  id: TINFOIL_ATTESTER_ID,
  verify: (target, deps) => runAttestation(() => verify(target, deps)),
};
