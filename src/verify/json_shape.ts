/**
 * Narrowing helpers for untrusted JSON artifacts (reports, receipts,
 * envelopes) fetched from a server or read from disk.
 */

/** Whether `value` is a non-null, non-array object. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `obj[key]` when it is a string, else undefined. */
export function stringField(obj: Record<string, unknown>, key: string): string | undefined {
  const v = obj[key];
  return typeof v === "string" ? v : undefined;
}

/** `obj[key]` when it is an object, else undefined. */
export function recordField(
  obj: Record<string, unknown>,
  key: string,
): Record<string, unknown> | undefined {
  const v = obj[key];
  return isRecord(v) ? v : undefined;
}
