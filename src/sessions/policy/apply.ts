/**
 * Applying an upstream's measurement policy to a freshly verified session
 * (the verification manager does, for every verifier): no policy installed
 * leaves the session as it was unless the provider requires one; a policy
 * that does not accept every measured subject refuses the session (no
 * prompt reaches the upstream); a match is recorded in the claims
 * (`extra.measurement_policy`: version, digest, signing key, the entry per
 * subject, when it closes) and bounds the session's expiry by the earliest
 * closing entry, so an upstream leaving the policy is re-verified then.
 */
import type { SessionDocument } from "../types.ts";
import type { InstalledPolicy } from "./document.ts";
import { matchPolicy, subjectsOf } from "./match.ts";

export type Applied =
  | { ok: true; document: SessionDocument; leavesAt: number | null }
  | { ok: false; reason: string };

export function applyMeasurementPolicy(
  doc: SessionDocument,
  installed: InstalledPolicy | undefined,
  required: boolean,
  nowS: number,
): Applied {
  if (!installed) {
    return required
      ? { ok: false, reason: "the provider requires a measurement policy and none is installed" }
      : { ok: true, document: doc, leavesAt: null };
  }
  const m = matchPolicy(installed.policy, subjectsOf(doc), nowS);
  if (!m.ok) return m;
  // The standard claims stay the verifier's: an entry may pin only some registers, so a match
  // is recorded as what it is (which policy, which entry), not as "software known good".
  const claims = {
    ...doc.claims,
    extra: {
      ...doc.claims.extra,
      measurement_policy: {
        version: m.version,
        digest: installed.digest,
        key_id: installed.key_id,
        matches: m.matches,
        leaves_at: m.leavesAt,
      },
    },
  };
  const expires = m.leavesAt === null ? doc.expires_at : Math.min(doc.expires_at, m.leavesAt);
  return { ok: true, document: { ...doc, claims, expires_at: expires }, leavesAt: m.leavesAt };
}

/** A warning that an upstream will fail closed at `at` (Unix seconds). */
export interface FailClosedWarning {
  kind: "measurement_leaving_policy" | "evidence_expiring";
  at: number;
  detail: string;
}

/**
 * What will make a verified session's upstream fail closed within
 * `warnSeconds`: its policy entry closing (with no other entry matching),
 * or the evidence's collateral or certificates expiring
 * (`extra.evidence_validity`, Unix seconds) before fresh evidence is fetched.
 */
export function failClosedWarnings(
  doc: SessionDocument,
  leavesAt: number | null,
  nowS: number,
  warnSeconds: number,
): FailClosedWarning[] {
  const out: FailClosedWarning[] = [];
  if (leavesAt !== null && leavesAt - nowS <= warnSeconds) {
    out.push({
      kind: "measurement_leaving_policy",
      at: leavesAt,
      detail: "the matched policy entry closes; the upstream fails closed unless a newer entry " +
        "accepts its measurements",
    });
  }
  const v = doc.claims.extra?.["evidence_validity"];
  if (v && typeof v === "object" && !("status" in v)) {
    for (const [what, at] of Object.entries(v as Record<string, unknown>)) {
      if (typeof at === "number" && at - nowS <= warnSeconds) {
        out.push({ kind: "evidence_expiring", at, detail: `${what} expires` });
      }
    }
  }
  return out;
}
