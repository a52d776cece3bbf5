/**
 * The result type of every offline verification step: one named, explained
 * pass/fail. Failed checks are values, never exceptions, so a verifier
 * always reports every check it could run.
 */

/** One verification step's outcome. */
export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

/** Shorthand constructor. */
export function check(name: string, ok: boolean, detail: string): Check {
  return { name, ok, detail };
}

/** Whether every check passed (false for an empty list: nothing was verified). */
export function allPassed(checks: readonly Check[]): boolean {
  return checks.length > 0 && checks.every((c) => c.ok);
}
