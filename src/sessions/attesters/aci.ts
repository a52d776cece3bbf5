/**
 * Verifier for upstreams that are themselves ACI services: observe the TLS
 * key, fetch `/v1/aci/attestation?nonce=<fresh>` over a channel pinned to
 * it, run the offline ACI report verification (keyset digest, statement,
 * quote report data) with DCAP verification of the TDX quote, and require
 * the observed TLS key to be one the attested keyset lists. Anything short
 * of every check passing is a failure.
 */
import { hexToBytes } from "../../aci/mod.ts";
import type {
  AttestationOutcome,
  AttestationTarget,
  AttesterDeps,
  SessionDocument,
  UpstreamAttester,
} from "../types.ts";
import {
  allPassed,
  evidenceQuote,
  isRecord,
  recordField,
  servedKeysetDigest,
  tdxQuoteCheck,
  verifyEventLog,
  verifyReport,
  verifyTdxQuoteWithSource,
} from "../../verify/mod.ts";
import { allowListClaim, tcbDetail, tcbUpToDateClaim, UNKNOWN } from "./claims.ts";
import { fetchBoundEvidence, parseJsonObject, sessionEvidence, unixSeconds } from "./endpoint.ts";
import { gpuClaim, requiredGpuShortfall } from "./gpu.ts";
import { refuse, runAttestation } from "./outcome.ts";
import { tdxPolicyOf, tdxTcbExtra } from "./tdx_policy.ts";

export const ACI_ATTESTER_ID = "aci-tdx/1";

/** The SPKI digests the keyset lists (lowercased), or a refusal when it lists none. */
function listedSpkis(keyset: Record<string, unknown>): string[] {
  const tls = keyset["tls_public_keys"];
  if (!Array.isArray(tls)) refuse("attested keyset has no tls_public_keys list");
  return tls.flatMap((k) =>
    isRecord(k) && typeof k["spki_sha256"] === "string" ? [k["spki_sha256"].toLowerCase()] : []
  );
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function verify(target: AttestationTarget, deps: AttesterDeps): Promise<AttestationOutcome> {
  const { conf, origin, tls, nonce, bytes } = await fetchBoundEvidence(target, deps, {
    path: "/aci/attestation",
    query: (nonce) => ({ nonce }),
    what: "ACI attestation report",
  });
  const report = parseJsonObject(bytes, "ACI attestation report");

  const nowMs = deps.now();
  const now = () => nowMs;
  const policy = tdxPolicyOf(conf);
  const checks = await verifyReport(report, {
    nonce,
    quoteCheck: tdxQuoteCheck({
      source: deps.tdx.collateral,
      now,
      rootCaDer: deps.tdx.rootCaDer,
      ...policy,
    }),
    allowDevEvidence: false,
    now,
  });
  if (!allPassed(checks)) {
    const failed = checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
    refuse(`ACI report rejected: ${failed.join("; ")}`);
  }

  const attestation = recordField(report, "attestation");
  const keyset = attestation ? recordField(attestation, "workload_keyset") : undefined;
  if (!attestation || !keyset) refuse("ACI report has no attested keyset");
  if (!listedSpkis(keyset).includes(tls.spkiSha256)) {
    refuse(`observed TLS key ${tls.spkiSha256} is not in the attested keyset's tls_public_keys`);
  }

  // The report checks passed, so this second pass only collects the quote's details.
  const quote = evidenceQuote(attestation["evidence"]);
  if (typeof quote === "string") refuse(quote);
  const tdx = await verifyTdxQuoteWithSource(quote, {
    source: deps.tdx.collateral,
    now,
    rootCaDer: deps.tdx.rootCaDer,
    ...policy,
  });
  if (!tdx.ok) refuse(`TDX quote rejected at ${tdx.stage}: ${tdx.reason}`);

  let composeHash: string | null = null;
  const evidence = recordField(attestation, "evidence");
  const log = evidence?.["event_log"];
  if (log !== undefined && log !== null) {
    const replay = verifyEventLog(log, tdx.report.rtmrs);
    if (!replay.ok) refuse(`event log: ${replay.reason}`);
    composeHash = replay.composeHash;
  }

  // GPU evidence, where the report carries it, answers the same fresh nonce.
  const gpuPayload = evidence?.["nvidia_payload"] ?? attestation["nvidia_payload"];
  const gpu = await gpuClaim(gpuPayload, hexToBytes(nonce), deps.gpu, nowMs);
  const shortfall = conf.require_gpu ? requiredGpuShortfall(gpu) : null;
  if (shortfall) refuse(shortfall);

  const nowS = unixSeconds(nowMs);
  const notAfter = keyset["not_after"];
  if (typeof notAfter !== "number") refuse("attested keyset has no numeric not_after");
  const expiresAt = Math.min(nowS + conf.session_ttl_seconds, tdx.collateralExpiresAt, notAfter);
  if (expiresAt <= nowS) refuse("evidence expires before a session could start");
  const digest = servedKeysetDigest(keyset);
  const document: SessionDocument = {
    api_version: "aci/1",
    upstream_name: target.name,
    endpoint: origin,
    verifier_id: ACI_ATTESTER_ID,
    established_at: nowS,
    expires_at: expiresAt,
    identity: { workload_keyset_digest: digest },
    channel_binding: [{ type: "tls_spki_sha256", origin, spki_sha256: tls.spkiSha256 }],
    claims: {
      tee_attested: {
        status: "asserted",
        source: "hardware_proven",
        reason: `TDX v${tdx.version} quote verified (DCAP chain to the pinned root); ` +
          "its report data binds the workload keyset, which lists the observed TLS key, and a fresh nonce",
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
        tcb_status: {
          status: "asserted",
          source: "verifier_derived",
          reason: tcbDetail(tdx.tcbStatus, tdx.advisoryIds),
        },
        tdx_tcb: tdxTcbExtra(tdx, policy),
        tdx_measurements: {
          mr_td: tdx.reportHex.mrTd,
          rtmr0: tdx.reportHex.rtmr0,
          rtmr1: tdx.reportHex.rtmr1,
          rtmr2: tdx.reportHex.rtmr2,
          rtmr3: tdx.reportHex.rtmr3,
          compose_hash: composeHash,
          event_log_replayed: log !== undefined && log !== null,
        },
        gpu_evidence: gpu.extra,
      },
    },
    evidence: sessionEvidence("application/json", bytes),
  };
  return { ok: true, document, spkiSha256: tls.spkiSha256 };
}

/** The verifier for upstreams that are ACI services. */
export const aciAttester: UpstreamAttester = {
  id: ACI_ATTESTER_ID,
  verify: (target, deps) => runAttestation(() => verify(target, deps)),
};
