/**
 * The gateway's attested identity as the client holds it: a report fetched
 * with a fresh nonce and verified fully (keyset digest, report data, the quote
 * and its hardware chain), judged against the caller's policy, and cached for
 * the keyset's validity. Earlier verified keysets are kept by digest, so a
 * receipt signed just before a rotation still finds its keyset.
 */
import { bytesToHex, isLowerHex } from "../aci/hex.ts";
import { allPassed, type Check } from "../verify/checks.ts";
import type { QuoteCheck } from "../verify/evidence.ts";
import { isRecord } from "../verify/json_shape.ts";
import { verifyReport } from "../verify/report.ts";
import { type AttestedKey, e2eeKeyFromReport } from "./e2ee.ts";
import { AciVerificationError, failedText } from "./errors.ts";
import { type ClientPolicy, manifestCheck, measurementCheck } from "./policy.ts";
import { ARTIFACT_FETCH_MS, type Transport } from "./transport.ts";

/** A verified report and what the client uses from it. */
export interface AttestedGateway {
  report: Record<string, unknown>;
  digest: string;
  checks: Check[];
  /** SPKI SHA-256 (hex) of the TLS keys the attested gateway terminates with. */
  tlsKeys: Set<string>;
  /** The transparency log's checkpoint key (raw Ed25519), when the keyset lists one. */
  logKey: Uint8Array | null;
  /** The E2EE key to encrypt to, or why there is none. */
  e2ee: AttestedKey | string;
  /** Epoch ms after which it is attested again (the keyset's not_after). */
  validUntilMs: number;
  dev: boolean;
}

export interface AttestDeps {
  baseURL: string;
  transport: Transport;
  policy: ClientPolicy;
  quoteCheck: QuoteCheck;
  now: () => number;
  randomBytes: (n: number) => Uint8Array;
}

function keysetOf(report: Record<string, unknown>): Record<string, unknown> {
  const att = report["attestation"];
  return isRecord(att) && isRecord(att["workload_keyset"]) ? att["workload_keyset"] : {};
}

/** The checkpoint key of the log (CONTRACTS: algo `c2sp-note-ed25519`), or null. */
function logKeyOf(keyset: Record<string, unknown>): Uint8Array | null {
  const keys = Array.isArray(keyset["receipt_signing_keys"]) ? keyset["receipt_signing_keys"] : [];
  const k = keys.find((e) => isRecord(e) && e["algo"] === "c2sp-note-ed25519");
  if (!isRecord(k) || !isLowerHex(k["public_key"], 32)) return null;
  return Uint8Array.from((k["public_key"] as string).match(/../g)!.map((h) => parseInt(h, 16)));
}

/** Fetches a report with a fresh nonce and verifies it and the policy; throws when refused. */
export async function attest(d: AttestDeps): Promise<AttestedGateway> {
  const nonce = bytesToHex(d.randomBytes(32));
  const url = new URL(`${d.baseURL}/aci/attestation`);
  url.searchParams.set("nonce", nonce);
  // Nothing secret goes out here: the report proves itself, whatever connection carried it.
  const res = await d.transport.send(url, {
    method: "GET",
    headers: new Headers({ accept: "application/json" }),
    signal: AbortSignal.timeout(ARTIFACT_FETCH_MS),
  }, null);
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new AciVerificationError("attestation_failed", `the report answered HTTP ${res.status}`);
  }
  const report: unknown = await res.json().catch(() => null);
  if (!isRecord(report)) {
    throw new AciVerificationError("attestation_failed", "the report is not a JSON object");
  }
  const checks = await verifyReport(report, {
    nonce,
    allowDevEvidence: d.policy.allow_dev_evidence,
    quoteCheck: d.quoteCheck,
    now: d.now,
  });
  const att = isRecord(report["attestation"]) ? report["attestation"] : {};
  const dev = att["tee_type"] !== "tdx" && att["tee_type"] !== "sev_snp";
  if (!allPassed(checks)) {
    const devRefused = dev && !d.policy.allow_dev_evidence;
    throw new AciVerificationError(
      devRefused ? "policy_refused" : "attestation_failed",
      devRefused
        ? "the gateway serves development evidence, refused without allow_dev_evidence"
        : `the report did not verify (${failedText(checks)})`,
      { checks },
    );
  }
  const policyChecks = [measurementCheck(report, d.policy, dev)];
  const manifest = manifestCheck(report, d.policy);
  if (manifest) policyChecks.push(manifest);
  if (!allPassed(policyChecks)) {
    throw new AciVerificationError(
      "policy_refused",
      `the attested gateway is not one the policy accepts (${failedText(policyChecks)})`,
      { checks: [...checks, ...policyChecks] },
    );
  }
  const keyset = keysetOf(report);
  const tls = Array.isArray(keyset["tls_public_keys"]) ? keyset["tls_public_keys"] : [];
  const notAfter = typeof keyset["not_after"] === "number" ? keyset["not_after"] * 1000 : 0;
  return {
    report,
    digest: report["workload_keyset_digest"] as string,
    checks: [...checks, ...policyChecks],
    tlsKeys: new Set(
      tls.filter(isRecord).map((k) => String(k["spki_sha256"]).toLowerCase()),
    ),
    logKey: logKeyOf(keyset),
    e2ee: e2eeKeyFromReport(report, {}),
    validUntilMs: notAfter,
    dev,
  };
}
