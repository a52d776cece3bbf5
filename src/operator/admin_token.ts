/**
 * The operator token that guards `/admin/v1/…`, `/healthz` detail and the
 * metrics. It is read from the environment by main.ts (absent → the admin API
 * is off and its paths answer 404). The check hashes both sides and compares
 * the digests with `timingSafeEqual`, so neither the token's content nor its
 * length leaks through timing. Only the token's digest is held in memory.
 */
import { Buffer } from "node:buffer";
import { createHash, timingSafeEqual } from "node:crypto";

/** The environment variable main.ts reads the token from. */
export const ADMIN_TOKEN_ENV = "GATEWAY_ADMIN_TOKEN";
/** Shorter tokens are refused at start-up: an operator token must not be guessable. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

export interface OperatorAuth {
  /** Whether this `Authorization` header carries the operator token. */
  check(authorization: string | null): boolean;
}

const sha256 = (s: string) => createHash("sha256").update(s, "utf8").digest();

/** null when no token is configured (the admin API is then off). Throws on a weak token. */
export function operatorAuth(token: string | undefined): OperatorAuth | null {
  if (token === undefined || token === "") return null;
  if (token.length < MIN_ADMIN_TOKEN_LENGTH || /\s/.test(token)) {
    throw new RangeError(
      `${ADMIN_TOKEN_ENV} must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters without spaces`,
    );
  }
  const want = sha256(token);
  return {
    check(authorization) {
      const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
      const got = sha256(m === null ? "" : m[1]);
      return timingSafeEqual(Buffer.from(want), Buffer.from(got)) && m !== null;
    },
  };
}
