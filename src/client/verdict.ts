/** What the verifying client concluded about one answer. */
import type { Check } from "../verify/checks.ts";
import type { AciVerificationError } from "./errors.ts";

/** What was verified for one answer (or, with a deferred inclusion verdict, for its log entry). */
export interface Verdict {
  endpoint: string;
  receiptId: string | null;
  /** "inclusion": the deferred log-inclusion verdict of an answer already delivered. */
  phase: "answer" | "inclusion";
  ok: boolean;
  /** Short names of the checks that passed (the `x-aci-verified` value). */
  verified: string[];
  checks: Check[];
  error?: AciVerificationError;
}
