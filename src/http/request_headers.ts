/**
 * The client's `x-service-trace-id` and `x-service-metadata` headers,
 * checked: a bad one is a 400 naming the header.
 */
import { GatewayError } from "./errors.ts";

const TRACE_ID = /^[A-Za-z0-9._:\/-]{1,128}$/;

export function traceIdOf(h: Headers, randomUUID: () => string): string {
  const v = h.get("x-service-trace-id");
  if (v === null) return randomUUID();
  if (!TRACE_ID.test(v)) {
    throw new GatewayError(
      "invalid_request",
      "x-service-trace-id must be 1-128 characters of [A-Za-z0-9._:/-]",
      {
        param: "x-service-trace-id",
      },
    );
  }
  return v;
}

export function metadataOf(h: Headers): unknown {
  const v = h.get("x-service-metadata");
  if (v === null) return undefined;
  const bad = () =>
    new GatewayError(
      "invalid_request",
      "x-service-metadata must be a JSON object of at most 2048 bytes",
      {
        param: "x-service-metadata",
      },
    );
  if (v.length > 2048) throw bad();
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    throw bad();
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw bad();
  return parsed;
}
