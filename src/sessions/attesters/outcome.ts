/**
 * How upstream attesters fail: a step that cannot pass throws a
 * `VerificationFailure` with a precise reason, and `runVerification` turns
 * that (and anything else thrown) into `{ ok: false, reason }`, so the
 * `UpstreamAttester` contract "never throws" holds in one place.
 */
import type { VerifyOutcome } from "../types.ts";

/** A verification step failed; `message` is the reason (no evidence bytes, no secrets). */
export class VerificationFailure extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "VerificationFailure";
  }
}

/** Stops verification with `reason`. */
export function refuse(reason: string): never {
  throw new VerificationFailure(reason);
}

/** Runs a verifier body; every throw becomes a failed outcome. */
export async function runVerification(body: () => Promise<VerifyOutcome>): Promise<VerifyOutcome> {
  try {
    return await body();
  } catch (e) {
    if (e instanceof VerificationFailure) return { ok: false, reason: e.message };
    // TLS/HTTP layers put only codes and pins in their messages, never bodies.
    const text = e instanceof Error ? e.message : String(e);
    return { ok: false, reason: `verifier error: ${text.slice(0, 300)}` };
  }
}
