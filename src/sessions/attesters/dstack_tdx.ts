/**
 * Verifier for dstack (vllm-proxy lineage) TDX upstreams: observe the TLS
 * key, fetch `/v1/attestation/report` with a fresh nonce over a channel
 * pinned to that key, DCAP-verify the quote, require report data v2
 * (`sha256(address ‖ sha256(SPKI DER)) ‖ nonce`, the only layout that binds
 * the TLS channel), replay the event log to the quoted RTMRs, and apply the
 * operator's MRTD / compose-hash allow-lists, and verify the report's NVIDIA
 * GPU payload with the same nonce. The session document records
 * the exact report bytes as evidence.
 */
import { hexToBytes, isDevQuote } from "../../aci/mod.ts";
import type {
  AttestationOutcome,
  AttestationTarget,
  AttesterDeps,
  SessionDocument,
  UpstreamAttester,
} from "../types.ts";
import { checkReportData, verifyEventLog, verifyTdxQuoteWithSource } from "../../verify/mod.ts";
import { allowListClaim, tcbDetail, tcbUpToDateClaim, UNKNOWN } from "./claims.ts";
import { parseDstackReport } from "./dstack_report.ts";
import { gpuClaim, requiredGpuShortfall } from "./gpu.ts";
import { fetchBoundEvidence, parseJsonObject, sessionEvidence, unixSeconds } from "./endpoint.ts";
import { refuse, runAttestation } from "./outcome.ts";
import { tdxPolicyOf, tdxTcbExtra } from "./tdx_policy.ts";

export const DSTACK_TDX_ATTESTER_ID = "dstack-tdx/1";

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function verify(target: AttestationTarget, deps: AttesterDeps): Promise<AttestationOutcome> {
  const { conf, origin, tls, nonce, bytes } = await fetchBoundEvidence(target, deps, {
    path: "/attestation/report",
    query: (nonce) => ({ signing_algo: "ecdsa", nonce, include_tls_fingerprint: "true" }),
    what: "attestation report",
  });
  const report = parseDstackReport(parseJsonObject(bytes, "attestation report"), nonce);
  if (isDevQuote(report.quote)) {
    refuse("intel_quote is development evidence (no TEE), not a TDX quote");
  }

  const nowMs = deps.now();
  const policy = tdxPolicyOf(conf);
  const tdx = await verifyTdxQuoteWithSource(report.quote, {
    source: deps.tdx.collateral,
    now: () => nowMs,
    rootCaDer: deps.tdx.rootCaDer,
    ...policy,
  });
  if (!tdx.ok) refuse(`TDX quote rejected at ${tdx.stage}: ${tdx.reason}`);

  const actual = tdx.report.reportData;
  const nonceBytes = hexToBytes(nonce);
  if (
    checkReportData(actual, { version: "v1", address: report.addressBytes, nonce: nonceBytes }).ok
  ) {
    refuse("report data uses the v1 layout (address ‖ nonce), which does not bind the TLS key");
  }
  const bound = checkReportData(actual, {
    version: "v2",
    address: report.addressBytes,
    spkiSha256: hexToBytes(tls.spkiSha256),
    nonce: nonceBytes,
  });
  if (!bound.ok) refuse(bound.reason);

  let composeHash: string | null = null;
  let logFormat: string | null = null;
  if (report.eventLog !== null) {
    // Classic and dstack ≥ 0.6 logs (runtime digests derived from payloads) both replay here.
    const replay = verifyEventLog(report.eventLog, tdx.report.rtmrs);
    if (!replay.ok) refuse(`event log: ${replay.reason}`);
    composeHash = replay.composeHash;
    logFormat = replay.format;
  }

  // The GPU evidence answers the same fresh nonce the quote binds.
  const gpu = await gpuClaim(report.nvidiaPayload, nonceBytes, deps.gpu, nowMs);
  const shortfall = conf.require_gpu ? requiredGpuShortfall(gpu) : null;
  if (shortfall) refuse(shortfall);

  const nowS = unixSeconds(nowMs);
  const expiresAt = Math.min(nowS + conf.session_ttl_seconds, tdx.collateralExpiresAt);
  if (expiresAt <= nowS) refuse("TDX collateral expires before a session could start");
  const detail = tcbDetail(tdx.tcbStatus, tdx.advisoryIds);
  const document: SessionDocument = {
    api_version: "aci/1",
    upstream_name: target.name,
    endpoint: origin,
    verifier_id: DSTACK_TDX_ATTESTER_ID,
    established_at: nowS,
    expires_at: expiresAt,
    identity: { signing_address: report.signingAddress, signing_algo: report.signingAlgo },
    channel_binding: [{ type: "tls_spki_sha256", origin, spki_sha256: tls.spkiSha256 }],
    claims: {
      tee_attested: {
        status: "asserted",
        source: "hardware_proven",
        reason:
          `TDX v${tdx.version} quote verified (DCAP chain to the pinned root, FMSPC ${tdx.fmspc}); ` +
          "report data v2 binds the signing address, the TLS key and a fresh nonce",
      },
      tcb_up_to_date: tcbUpToDateClaim(tdx.tcbStatus, tdx.advisoryIds),
      os_known_good: allowListClaim(conf.allowed_mrtd, tdx.reportHex.mrTd, "MRTD"),
      serving_software_known_good: allowListClaim(
        conf.allowed_compose_hashes,
        composeHash,
        "compose hash",
      ),
      gpu_attested: gpu.claim,
      model_weights_provenance: UNKNOWN,
      extra: {
        tcb_status: { status: "asserted", source: "verifier_derived", reason: detail },
        tdx_tcb: tdxTcbExtra(tdx, policy),
        tdx_measurements: {
          mr_td: tdx.reportHex.mrTd,
          rtmr0: tdx.reportHex.rtmr0,
          rtmr1: tdx.reportHex.rtmr1,
          rtmr2: tdx.reportHex.rtmr2,
          rtmr3: tdx.reportHex.rtmr3,
          compose_hash: composeHash,
          event_log_replayed: report.eventLog !== null,
          event_log_format: logFormat,
        },
        gpu_evidence: gpu.extra,
      },
    },
    evidence: sessionEvidence("application/json", bytes),
  };
  return { ok: true, document, spkiSha256: tls.spkiSha256 };
}

/** The dstack TDX verifier. */
export const dstackTdxAttester: UpstreamAttester = {
  id: DSTACK_TDX_ATTESTER_ID,
  verify: (target, deps) => runAttestation(() => verify(target, deps)),
};
