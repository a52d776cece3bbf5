/**
 * Claim builders shared by the upstream attesters, so every attester words
 * the same facts the same way: allow-list policies (asserted / refuted /
 * unknown when no policy is configured) and the TDX TCB status.
 */
import type { Claim } from "../types.ts";

/** The claim nothing was checked for. */
export const UNKNOWN: Claim = { status: "unknown" };

/**
 * A measurement against an operator allow-list: unknown without a list;
 * asserted when the (hardware-proven) value is listed; refuted otherwise,
 * including when the value could not be established.
 */
export function allowListClaim(
  allowed: readonly string[],
  value: string | null,
  what: string,
): Claim {
  if (allowed.length === 0) return UNKNOWN;
  if (value === null) {
    return {
      status: "refuted",
      source: "verifier_derived",
      reason: `${what} not established by the evidence; the allow-list cannot be met`,
    };
  }
  const listed = allowed.includes(value.toLowerCase());
  return {
    status: listed ? "asserted" : "refuted",
    source: "verifier_derived",
    reason: `${what} ${value} is ${listed ? "" : "not "}in the operator allow-list`,
  };
}

/** The raw TCB status and advisories, worded once. */
export function tcbDetail(status: string, advisoryIds: readonly string[]): string {
  return `${status}; advisories: ${advisoryIds.length ? advisoryIds.join(",") : "none"}`;
}

/**
 * `tcb_up_to_date` from a verified quote's TCB status. Source
 * `verifier_derived`: the status is the verifier's match of the quote's SVNs
 * against Intel-signed collateral, not a value the hardware states itself.
 */
export function tcbUpToDateClaim(status: string, advisoryIds: readonly string[]): Claim {
  return {
    status: status === "UpToDate" ? "asserted" : "refuted",
    source: "verifier_derived",
    reason: `TDX TCB status ${tcbDetail(status, advisoryIds)}`,
  };
}
