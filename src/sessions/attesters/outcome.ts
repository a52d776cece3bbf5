/**
 * How upstream attesters fail: a step that cannot pass throws a
 * `AttestationFailure` with a precise reason, and `runAttestation` turns
 * that (and anything else thrown) into `{ ok: false, reason }`, so the
 * `UpstreamAttester` contract "never throws" holds in one place.
 */
import type { AttestationOutcome } from "../types.ts";

/** A verification step failed; `message` is the reason (no evidence bytes, no secrets). */
export class AttestationFailure extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "AttestationFailure";
  }
}

/** Stops verification with `reason`. */
export function refuse(reason: string): never {
  throw new AttestationFailure(reason);
}

/** Runs a verifier body; every throw becomes a failed outcome. */
export async function runAttestation(
  body: () => Promise<AttestationOutcome>,
): Promise<AttestationOutcome> {
  try {
    return await body();
  } catch (e) {
    if (e instanceof AttestationFailure) return { ok: false, reason: e.message };
    // TLS/HTTP layers put only codes and pins in their messages, never bodies.
    const text = e instanceof Error ? e.message : String(e);
    return { ok: false, reason: `verifier error: ${text.slice(0, 300)}` };
  }
}
