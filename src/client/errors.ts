/**
 * The one error type of the verifying client: a refusal with a code the
 * caller can branch on and the checks that led to it (never a body or key).
 */
import type { Check } from "../verify/checks.ts";

export type VerificationCode =
  | "attestation_failed"
  | "policy_refused"
  | "tls_pin_mismatch"
  | "e2ee_unavailable"
  | "e2ee_failed"
  | "receipt_missing"
  | "receipt_invalid"
  | "keyset_mismatch"
  | "inclusion_failed";

/** Thrown (or raised in a stream before its end) when a verification step fails. */
export class AciVerificationError extends Error {
  readonly code: VerificationCode;
  /** The failed (and passed) checks, when the step ran named checks. */
  readonly checks: readonly Check[];
  readonly receiptId: string | null;

  constructor(
    code: VerificationCode,
    message: string,
    o: { checks?: readonly Check[]; receiptId?: string | null; cause?: unknown } = {},
  ) {
    super(`${code}: ${message}`, { cause: o.cause });
    this.name = "AciVerificationError";
    this.code = code;
    this.checks = o.checks ?? [];
    this.receiptId = o.receiptId ?? null;
  }
}

/** `name: detail` of each failed check, joined. */
export function failedText(checks: readonly Check[]): string {
  return checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`).join("; ");
}
