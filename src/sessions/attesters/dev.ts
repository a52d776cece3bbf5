/**
 * Verifier for the development upstream (`dev-insecure/1`): checks the dev
 * attestation endpoint's binding (`src/demo/dev_attestation.ts`) over the
 * pinned channel: a DEV quote whose slot is
 * `sha256(address ‖ sha256(SPKI DER)) ‖ nonce` for the observed TLS key and a
 * fresh nonce. It refuses hardware-looking or unbound reports, and its claims
 * say plainly that no TEE stands behind the session.
 */
import { hexToBytes, isDevQuote, parseDevQuote } from "../../aci/mod.ts";
import type {
  AttestationOutcome,
  AttestationTarget,
  AttesterDeps,
  SessionDocument,
  UpstreamAttester,
} from "../types.ts";
import { checkReportData } from "../../verify/mod.ts";
import { UNKNOWN } from "./claims.ts";
import { parseDstackReport } from "./dstack_report.ts";
import { fetchBoundEvidence, parseJsonObject, sessionEvidence, unixSeconds } from "./endpoint.ts";
import { refuse, runAttestation } from "./outcome.ts";

export const DEV_ATTESTER_ID = "dev-insecure/1";

async function verify(target: AttestationTarget, deps: AttesterDeps): Promise<AttestationOutcome> {
  const { conf, origin, tls, nonce, bytes } = await fetchBoundEvidence(target, deps, {
    path: "/attestation/report",
    query: (nonce) => ({ signing_algo: "ecdsa", nonce }),
    what: "development attestation report",
  });
  const report = parseDstackReport(parseJsonObject(bytes, "development attestation report"), nonce);
  if (!isDevQuote(report.quote)) {
    refuse("report carries a hardware-looking quote; the dev verifier only accepts DEV quotes");
  }
  let slot: Uint8Array;
  try {
    slot = parseDevQuote(report.quote);
  } catch (e) {
    refuse(`malformed development quote: ${e instanceof Error ? e.message : "unparseable"}`);
  }
  const bound = checkReportData(slot, {
    version: "v2",
    address: report.addressBytes,
    spkiSha256: hexToBytes(tls.spkiSha256),
    nonce: hexToBytes(nonce),
  });
  if (!bound.ok) refuse(bound.reason);

  const nowS = unixSeconds(deps.now());
  const document: SessionDocument = {
    api_version: "aci/1",
    upstream_name: target.name,
    endpoint: origin,
    verifier_id: DEV_ATTESTER_ID,
    established_at: nowS,
    expires_at: nowS + conf.session_ttl_seconds,
    identity: { signing_address: report.signingAddress, signing_algo: report.signingAlgo },
    channel_binding: [{ type: "tls_spki_sha256", origin, spki_sha256: tls.spkiSha256 }],
    claims: {
      tee_attested: {
        status: "refuted",
        source: "verifier_derived",
        reason: "development evidence: no TEE",
      },
      tcb_up_to_date: UNKNOWN,
      os_known_good: UNKNOWN,
      serving_software_known_good: UNKNOWN,
      gpu_attested: UNKNOWN,
      model_weights_provenance: UNKNOWN,
      extra: {
        development: {
          status: "asserted",
          source: "verifier_derived",
          reason: "DEV quote (unsigned): it binds the signing address, the TLS key and a fresh " +
            "nonce, but nothing proves a TEE; for development only",
        },
        ...(conf.dev_counts_for_aci_verified
          ? {
            aci_verified_by_development_switch: {
              status: "asserted" as const,
              source: "operator_asserted" as const,
              reason: "confidential.dev_counts_for_aci_verified is set: this development " +
                "session satisfies aci_verified although no TEE stands behind it",
            },
          }
          : {}),
      },
    },
    evidence: sessionEvidence("application/json", bytes),
  };
  return { ok: true, document, spkiSha256: tls.spkiSha256 };
}

/** The honest development verifier. */
export const devAttester: UpstreamAttester = {
  id: DEV_ATTESTER_ID,
  verify: (target, deps) => runAttestation(() => verify(target, deps)),
};
