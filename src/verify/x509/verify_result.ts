/**
 * The result shape every verifier in `src/verify/` returns instead of
 * throwing: success carries its findings, failure a precise human reason.
 */

/** A failed check, with the reason a caller can log (never evidence bytes or secrets). */
export interface Failure {
  ok: false;
  reason: string;
}

/** `{ ok: true, ...T }` or a `Failure`. */
export type Checked<T extends object = Record<never, never>> = ({ ok: true } & T) | Failure;

/** Builds a failure. */
export function fail(reason: string): Failure {
  return { ok: false, reason };
}

/** The message of anything thrown, for reasons (library errors carry no evidence bytes). */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
