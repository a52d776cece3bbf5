/**
 * The TDX TCB policy: which of Intel's TCB statuses a verified quote may
 * carry and still count as verified. `NotSupported` (the platform matches no
 * TCB level, or its TDX module identity or SVN is not in the TCB Info) and
 * `Revoked` always fail; everything else is the operator's choice per
 * provider (docs/decisions/tdx-tcb-policy.md).
 */
import type { TcbStatus } from "./tcb_level.ts";
import {
  type AcceptableTcbStatus,
  DEFAULT_ACCEPTED_TCB_STATUSES,
} from "../../config/attestation_names.ts";

export {
  ACCEPTABLE_TCB_STATUSES,
  type AcceptableTcbStatus,
  DEFAULT_ACCEPTED_TCB_STATUSES,
} from "../../config/attestation_names.ts";

/** What a verified quote's TCB must satisfy. */
export interface TdxTcbPolicy {
  accepted: readonly AcceptableTcbStatus[];
}

/** The TCB outcome the policy judges. */
export interface TcbOutcome {
  tcbStatus: TcbStatus;
  /** Why the status is `NotSupported`, when it is. */
  detail?: string;
}

/** Why `tcb` fails `policy`, or null when it passes. */
export function tcbPolicyViolation(tcb: TcbOutcome, policy?: TdxTcbPolicy): string | null {
  const s = tcb.tcbStatus;
  if (s === "NotSupported") {
    return `TCB status NotSupported: ${tcb.detail ?? "the platform matches no TCB level"}`;
  }
  if (s === "Revoked") return "TCB status is Revoked";
  const accepted = policy?.accepted ?? DEFAULT_ACCEPTED_TCB_STATUSES;
  if (!(accepted as readonly string[]).includes(s)) {
    return `TCB status ${s} is not accepted by the TCB policy (accepted: ${accepted.join(", ")})`;
  }
  return null;
}
