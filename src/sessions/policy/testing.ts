/**
 * Test helpers: an operator key pair and a signer of measurement policies
 * (Ed25519 over JCS(policy), as an operator's tooling would). Test-only.
 */
import {
  bytesToHex,
  ed25519RawPublicKey,
  ed25519Sign,
  generateEd25519PrivateKey,
  jcsBytes,
} from "../../aci/mod.ts";
import type { MeasurementPolicy, PolicyEntry, PolicyKey } from "./document.ts";

export interface PolicySigner {
  key: PolicyKey;
  sign(policy: MeasurementPolicy): Record<string, unknown>;
  /** A policy for `upstream` at `version` with `entries`, signed. */
  policy(upstream: string, version: number, entries: PolicyEntry[]): Record<string, unknown>;
}

export function policySigner(keyId = "ops-test"): PolicySigner {
  const sk = generateEd25519PrivateKey();
  const key = { key_id: keyId, public_key: bytesToHex(ed25519RawPublicKey(sk)) };
  const sign = (policy: MeasurementPolicy) => ({
    policy,
    signature: {
      key_id: keyId,
      algo: "ed25519",
      value: btoa(String.fromCharCode(...ed25519Sign(sk, jcsBytes(policy)))),
    },
  });
  return {
    key,
    sign,
    policy: (upstream, version, entries) =>
      sign({
        api_version: "measurement-policy/1",
        upstream,
        version,
        issued_at: 1_764_000_000,
        entries,
      }),
  };
}
