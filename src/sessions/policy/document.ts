/**
 * The measurement policy of one upstream: a versioned accept-list of
 * measurements, signed by an operator key the configuration pins
 * (`trust.measurement_policy_keys`). The signature is Ed25519 over the JCS
 * bytes of `policy`, so a policy survives reformatting and is verifiable
 * with any RFC 8785 implementation. An entry lists the values that must all
 * match (absent fields match anything) and may carry a window
 * (`not_before` / `not_after`, Unix seconds): a staged rollout lists the new
 * release from a date and the old one until a date, both accepted while the
 * windows overlap. docs/decisions/measurement-policy.md.
 */
import { z } from "zod";
import { ed25519Verify, hexToBytes, jcsBytes, sha256Prefixed } from "../../aci/mod.ts";

const hex48 = z.string().regex(/^[0-9a-f]{96}$/);
const hex32 = z.string().regex(/^[0-9a-f]{64}$/);
const hexAny = z.string().regex(/^([0-9a-f]{2})+$/);

export const PolicyEntry = z.strictObject({
  /** Names the entry in the session's claims (e.g. a release tag). */
  id: z.string().min(1).max(200),
  /** `gateway`, `model` (NEAR AI's CVMs) or `upstream`; absent: any subject. */
  subject: z.string().min(1).max(100).optional(),
  mrtd: hex48.optional(),
  rtmr0: hex48.optional(),
  rtmr1: hex48.optional(),
  rtmr2: hex48.optional(),
  compose_hash: hex32.optional(),
  /** dstack app id (20 bytes hex, as the event log's `app-id`). */
  app_id: hexAny.optional(),
  snp_measurement: hex48.optional(),
  snp_host_data: hex32.optional(),
  /** Every GPU's driver / VBIOS version must be one of these. */
  gpu_driver_versions: z.array(z.string().min(1)).min(1).optional(),
  vbios_versions: z.array(z.string().min(1)).min(1).optional(),
  not_before: z.number().int().nonnegative().optional(),
  not_after: z.number().int().nonnegative().optional(),
});
export type PolicyEntry = z.infer<typeof PolicyEntry>;

export const MeasurementPolicy = z.strictObject({
  api_version: z.literal("measurement-policy/1"),
  /** The provider name this policy is for. */
  upstream: z.string().min(1),
  /** Strictly increasing: an older policy can never replace a newer one. */
  version: z.number().int().positive(),
  issued_at: z.number().int().nonnegative(),
  entries: z.array(PolicyEntry).min(1).max(1000),
});
export type MeasurementPolicy = z.infer<typeof MeasurementPolicy>;

export const SignedPolicy = z.strictObject({
  policy: MeasurementPolicy,
  signature: z.strictObject({
    key_id: z.string().min(1),
    algo: z.literal("ed25519"),
    /** Base64 of the 64-byte signature over JCS(policy). */
    value: z.string().min(1),
  }),
});
export type SignedPolicy = z.infer<typeof SignedPolicy>;

/** An operator key that may sign policies. */
export interface PolicyKey {
  key_id: string;
  /** 32-byte Ed25519 public key, hex. */
  public_key: string;
}

/** A verified policy and the digest of its signed bytes. */
export interface InstalledPolicy {
  policy: MeasurementPolicy;
  /** `sha256:<hex>` of JCS(policy). */
  digest: string;
  key_id: string;
}

function b64(s: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/** Parses and checks the signature of a signed policy; never throws. */
export function verifySignedPolicy(
  input: unknown,
  keys: readonly PolicyKey[],
): { ok: true; installed: InstalledPolicy } | { ok: false; reason: string } {
  const parsed = SignedPolicy.safeParse(input);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    return {
      ok: false,
      reason: `not a signed measurement policy: ${i?.path.join(".")} ${i?.message}`,
    };
  }
  const { policy, signature } = parsed.data;
  for (const e of policy.entries) {
    if (e.not_before !== undefined && e.not_after !== undefined && e.not_after <= e.not_before) {
      return { ok: false, reason: `entry ${e.id}: not_after is not after not_before` };
    }
  }
  const key = keys.find((k) => k.key_id === signature.key_id);
  if (!key) return { ok: false, reason: `policy signed by unknown key ${signature.key_id}` };
  const sig = b64(signature.value);
  const bytes = jcsBytes(policy);
  const valid = sig !== null && ed25519Verify(hexToBytes(key.public_key), sig, bytes);
  if (!valid) return { ok: false, reason: `policy signature does not verify under ${key.key_id}` };
  return { ok: true, installed: { policy, digest: sha256Prefixed(bytes), key_id: key.key_id } };
}
