/**
 * Verifier for operator-pinned upstreams: no hardware evidence, only the
 * operator's statement that the upstream behind this TLS key is trusted.
 * It observes the TLS key, requires it to equal `confidential.spki_sha256`,
 * and records the certificate as evidence. Every claim it makes is
 * `operator_asserted`; it never claims anything was hardware-proven.
 */
import type {
  AttestationOutcome,
  AttestationTarget,
  AttesterDeps,
  SessionDocument,
  UpstreamAttester,
} from "../types.ts";
import { UNKNOWN } from "./claims.ts";
import { confidentialOf, sessionEvidence, unixSeconds, upstreamOrigin } from "./endpoint.ts";
import { refuse, runAttestation } from "./outcome.ts";

export const PINNED_ATTESTER_ID = "pinned-spki/1";

async function verify(target: AttestationTarget, deps: AttesterDeps): Promise<AttestationOutcome> {
  const conf = confidentialOf(target);
  const pin = conf.spki_sha256?.toLowerCase();
  if (!pin) refuse("the pinned verifier needs confidential.spki_sha256");
  const origin = upstreamOrigin(target.baseUrl);
  const tls = await deps.observeTls(origin, conf.tls_ca_pem);
  if (tls.spkiSha256 !== pin) {
    refuse(`observed TLS key ${tls.spkiSha256} is not the operator-pinned key ${pin}`);
  }
  const nowS = unixSeconds(deps.now());
  const document: SessionDocument = {
    api_version: "aci/1",
    upstream_name: target.name,
    endpoint: origin,
    verifier_id: PINNED_ATTESTER_ID,
    established_at: nowS,
    expires_at: nowS + conf.session_ttl_seconds,
    channel_binding: [{ type: "tls_spki_sha256", origin, spki_sha256: tls.spkiSha256 }],
    claims: {
      tee_attested: {
        status: "asserted",
        source: "operator_asserted",
        reason:
          "the operator pinned this TLS key as a trusted enclave; no hardware evidence checked",
      },
      tcb_up_to_date: UNKNOWN,
      os_known_good: UNKNOWN,
      serving_software_known_good: UNKNOWN,
      gpu_attested: UNKNOWN,
      model_weights_provenance: UNKNOWN,
    },
    evidence: sessionEvidence("application/pkix-cert", tls.certDer),
  };
  return { ok: true, document, spkiSha256: tls.spkiSha256 };
}

/** The operator-pinned SPKI verifier. */
export const pinnedAttester: UpstreamAttester = {
  id: PINNED_ATTESTER_ID,
  verify: (target, deps) => runAttestation(() => verify(target, deps)),
};
