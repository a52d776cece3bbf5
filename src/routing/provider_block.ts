/**
 * The `provider` routing block of inference requests, and the routing
 * headers. Validation only: what the client demands, not who can serve it.
 */
import { badParam } from "../http/errors.ts";

export interface RoutingConstraints {
  zdr: boolean;
  aciVerified: boolean;
  /** null = no pinning; else any one of these session ids may serve. */
  aciSessionIds: string[] | null;
  /** `x-service-provider`: serve only through this provider. */
  forcedProvider: string | null;
  /** `X-Upstream-Verification: none`: waives the preference for verified upstreams (never a constraint). */
  verificationWaived: boolean;
}

const SESSION_ID = /^[0-9a-f]{64}$/;
const KNOWN_ACI = new Set(["aci_verified", "aci_session_ids"]);

/** Validate the raw `provider` value of a request body together with the routing headers. */
export function parseRouting(provider: unknown, headers: Headers): RoutingConstraints {
  const c: RoutingConstraints = {
    zdr: false,
    aciVerified: false,
    aciSessionIds: null,
    forcedProvider: null,
    verificationWaived: false,
  };
  if (provider !== undefined && provider !== null) {
    if (typeof provider !== "object" || Array.isArray(provider)) {
      throw badParam("provider", "provider must be an object");
    }
    const p = provider as Record<string, unknown>;
    for (const k of Object.keys(p)) {
      if (k.startsWith("aci_") && !KNOWN_ACI.has(k)) {
        throw badParam(
          `provider.${k}`,
          `unknown attestation constraint provider.${k.slice(0, 60)}`,
        );
      }
    }
    c.zdr = optionalBool(p.zdr, "provider.zdr");
    const verified = p.aci_verified;
    c.aciVerified = optionalBool(verified, "provider.aci_verified");
    if (p.aci_session_ids !== undefined) {
      const ids = p.aci_session_ids;
      if (!Array.isArray(ids)) {
        throw badParam("provider.aci_session_ids", "aci_session_ids must be an array");
      }
      if (ids.length === 0) {
        throw badParam(
          "provider.aci_session_ids",
          "aci_session_ids must list at least one session id",
        );
      }
      if (verified === false) {
        throw badParam(
          "provider.aci_session_ids",
          "aci_session_ids implies aci_verified; it cannot be combined with aci_verified: false",
        );
      }
      ids.forEach((id, i) => {
        if (typeof id !== "string") {
          throw badParam(`provider.aci_session_ids[${i}]`, "session ids must be strings");
        }
        if (!SESSION_ID.test(id)) {
          throw badParam(
            `provider.aci_session_ids[${i}]`,
            "session ids are 64 lowercase hex characters",
          );
        }
      });
      c.aciSessionIds = [...new Set(ids as string[])];
      c.aciVerified = true;
    }
  }
  const forced = headers.get("x-service-provider");
  if (forced !== null) {
    if (!/^[a-z0-9][a-z0-9_-]{0,63}$/.test(forced)) {
      throw badParam("x-service-provider", "x-service-provider must name a configured provider");
    }
    c.forcedProvider = forced;
  }
  const uv = headers.get("x-upstream-verification");
  if (uv !== null) {
    if (uv.trim().toLowerCase() !== "none") {
      throw badParam(
        "x-upstream-verification",
        "the only accepted value of X-Upstream-Verification is 'none'",
      );
    }
    c.verificationWaived = true;
  }
  return c;
}

function optionalBool(v: unknown, param: string): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") throw badParam(param, `${param} must be a boolean`);
  return v;
}
