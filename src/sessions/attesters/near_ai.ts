/**
 * Verifier for NEAR AI Cloud upstreams: observe the TLS key, fetch
 * `/v1/attestation/report?model&nonce&signing_algo=ecdsa&include_tls_fingerprint=true`
 * over a channel pinned to it, and require every check of the offline NEAR
 * AI verification (verify/near_ai/) to pass for the gateway CVM (whose
 * REPORTDATA must bind this TLS key and the nonce) and every model CVM
 * (signing address ‖ nonce, event log, compose hash), plus the models' NVIDIA
 * GPU evidence against the same nonce where the provider requires GPUs.
 * The session records each CVM's registers as a measured subject, so a
 * measurement policy can pin gateway and model separately, and the
 * attested signing addresses that `/v1/signature` must recover to.
 */
import type {
  AttestationOutcome,
  AttestationTarget,
  AttesterDeps,
  Claim,
  SessionDocument,
  UpstreamAttester,
} from "../types.ts";
import { hexToBytes } from "../../aci/mod.ts";
import { type ComponentVerdict, parseNearAiReport, verifyNearAiReport } from "../../verify/mod.ts";
import { allowListClaim, tcbDetail, UNKNOWN } from "./claims.ts";
import { fetchBoundEvidence, parseJsonObject, sessionEvidence, unixSeconds } from "./endpoint.ts";
import { type GpuClaim, gpuClaim, requiredGpuShortfall } from "./gpu.ts";
import { refuse, runAttestation } from "./outcome.ts";

export const NEAR_AI_ATTESTER_ID = "near-ai/1";

function subjectOf(v: ComponentVerdict, gpu: GpuClaim | null): Record<string, unknown> {
  const r = v.tdx!.reportHex;
  const gpus = gpu?.extra["gpus"];
  return {
    mrtd: r.mrTd,
    rtmr0: r.rtmr0,
    rtmr1: r.rtmr1,
    rtmr2: r.rtmr2,
    rtmr3: r.rtmr3,
    compose_hash: v.composeHash,
    app_id: v.appId,
    tcb_status: v.tdx!.tcbStatus,
    ...(Array.isArray(gpus)
      ? {
        gpu_driver_versions: gpus.map((g) => String(g.driver_version)),
        vbios_versions: gpus.map((g) => String(g.vbios_version)),
      }
      : {}),
  };
}

function combinedGpu(claims: GpuClaim[]): Claim {
  if (claims.length === 0) return UNKNOWN;
  if (claims.every((c) => c.claim.status === "asserted")) return claims[0].claim;
  return claims.find((c) => c.claim.status === "refuted")?.claim ?? UNKNOWN;
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function verify(target: AttestationTarget, deps: AttesterDeps): Promise<AttestationOutcome> {
  const model = target.provider.confidential?.near_ai?.model;
  const { conf, origin, tls, nonce, bytes } = await fetchBoundEvidence(target, deps, {
    path: "/attestation/report",
    query: (n) => ({
      ...(model ? { model } : {}),
      nonce: n,
      signing_algo: "ecdsa",
      include_tls_fingerprint: "true",
    }),
    what: "NEAR AI attestation report",
  });
  const parsed = parseNearAiReport(parseJsonObject(bytes, "NEAR AI attestation report"));
  if (!parsed.ok) refuse(`NEAR AI report: ${parsed.reason}`);
  const report = parsed.report;
  if (model !== undefined) {
    if (report.models.length === 0) refuse(`the report attests no model CVM for ${model}`);
    const other = report.models.find((m) => m.modelName !== null && m.modelName !== model);
    if (other) refuse(`model attestation is for ${other.modelName}, not ${model}`);
  }
  const nowMs = deps.now();
  const v = await verifyNearAiReport(report, {
    nonce,
    tdx: { source: deps.tdx.collateral, rootCaDer: deps.tdx.rootCaDer },
    now: nowMs,
    observedSpkiSha256: tls.spkiSha256,
    requireTlsBinding: true,
  });
  const failed = v.checks.find((c) => !c.ok);
  if (failed) refuse(`${failed.name}: ${failed.detail}`);

  const nonceBytes = hexToBytes(nonce);
  const gpus: GpuClaim[] = [];
  for (const m of report.models) {
    const g = await gpuClaim(m.nvidiaPayload, nonceBytes, deps.gpu, nowMs);
    const shortfall = conf.require_gpu ? requiredGpuShortfall(g) : null;
    if (shortfall) refuse(`${m.subject}: ${shortfall}`);
    gpus.push(g);
  }

  const components = [v.gateway, ...v.models];
  const collateralAt = Math.min(...components.map((c) => c.tdx!.collateralExpiresAt));
  const nowS = unixSeconds(nowMs);
  const expiresAt = Math.min(nowS + conf.session_ttl_seconds, collateralAt);
  if (expiresAt <= nowS) refuse("TDX collateral expires before a session could start");
  const statuses = components.map((c) =>
    `${c.subject} ${tcbDetail(c.tdx!.tcbStatus, c.tdx!.advisoryIds)}`
  );
  const allCurrent = components.every((c) => c.tdx!.tcbStatus === "UpToDate");
  const g = v.gateway.tdx!;
  const document: SessionDocument = {
    api_version: "aci/1",
    upstream_name: target.name,
    endpoint: origin,
    verifier_id: NEAR_AI_ATTESTER_ID,
    established_at: nowS,
    expires_at: expiresAt,
    identity: {
      signing_address: report.gateway.signingAddress,
      signing_algo: "ecdsa",
      model_signing_addresses: report.models.map((m) => m.signingAddress),
      ...(model ? { model } : {}),
    },
    channel_binding: [{ type: "tls_spki_sha256", origin, spki_sha256: tls.spkiSha256 }],
    claims: {
      tee_attested: {
        status: "asserted",
        source: "hardware_proven",
        reason: `NEAR AI gateway CVM and ${report.models.length} model CVM(s): TDX quotes ` +
          `verified (DCAP chain to the pinned root, FMSPC ${g.fmspc}); the gateway's report data ` +
          "binds its signing address, this TLS key and a fresh nonce; each model's binds its " +
          "signing address and the nonce; event logs replay",
      },
      tcb_up_to_date: {
        status: allCurrent ? "asserted" : "refuted",
        source: "verifier_derived",
        reason: `TDX TCB status ${statuses.join("; ")}`,
      },
      os_known_good: allowListClaim(conf.allowed_mrtd, g.reportHex.mrTd, "gateway MRTD"),
      serving_software_known_good: allowListClaim(
        conf.allowed_compose_hashes,
        v.gateway.composeHash,
        "gateway compose hash",
      ),
      gpu_attested: combinedGpu(gpus),
      model_weights_provenance: UNKNOWN,
      extra: {
        tcb_status: { status: "asserted", source: "verifier_derived", reason: statuses.join("; ") },
        measured_subjects: Object.fromEntries(
          components.map((c, i) => [c.subject, subjectOf(c, i === 0 ? null : gpus[i - 1])]),
        ),
        gpu_evidence: gpus.length === 1 ? gpus[0].extra : { models: gpus.map((x) => x.extra) },
        evidence_validity: { tdx_collateral: collateralAt },
      },
    },
    evidence: sessionEvidence("application/json", bytes),
  };
  return { ok: true, document, spkiSha256: tls.spkiSha256 };
}

/** The NEAR AI Cloud verifier. */
export const nearAiAttester: UpstreamAttester = {
  id: NEAR_AI_ATTESTER_ID,
  verify: (target, deps) => runAttestation(() => verify(target, deps)),
};
