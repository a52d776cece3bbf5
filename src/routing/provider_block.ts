/**
 * The `provider` routing block of inference requests, and the routing
 * headers. Validation only: what the client demands, not who can serve it.
 */
import { badParam } from "../http/mod.ts";

export interface RoutingConstraints {
  zdr: boolean;
  /** What asked for zdr, as the client wrote it (a refusal names it); default `provider.zdr`. */
  zdrParam?: string;
  aciVerified: boolean;
  /** null = no pinning; else any one of these session ids may serve. */
  aciSessionIds: string[] | null;
  /** `x-service-provider`: serve only through this provider. */
  forcedProvider: string | null;
  /** `X-Upstream-Verification: none`: waives the preference for verified upstreams (never a constraint). */
  verificationWaived: boolean;
  /** OpenRouter `only`: serve only through these providers (null = no restriction). */
  only: string[] | null;
  /** OpenRouter `ignore`: never through these providers. */
  ignore: string[];
  /** OpenRouter `order`: try these providers first, in this order. */
  order: string[] | null;
  /** OpenRouter `allow_fallbacks` (default true). */
  allowFallbacks: boolean;
}

/** More pinned sessions than any deployment has is a malformed request, not a search. */
const MAX_SESSION_IDS = 256;

/** Members of `provider` with real semantics (README, "Routing"). */
const IMPLEMENTED = new Set([
  "zdr",
  "aci_verified",
  "aci_session_ids",
  "data_collection",
  "order",
  "only",
  "ignore",
  "allow_fallbacks",
]);

/** OpenRouter provider preferences this gateway does not implement: refused, never ignored. */
const NOT_IMPLEMENTED = new Set([
  "require_parameters",
  "quantizations",
  "sort",
  "max_price",
  "experimental",
  "preferred_min_throughput",
  "preferred_max_latency",
  "min_throughput",
  "max_latency",
  "enforce_distillable_text",
]);

/**
 * The routing constraints as headers, for proxies that rewrite bodies
 * (docs/decisions/routing-constraint-headers.md): each maps to one member of
 * the `provider` block, parsed as strictly, and a header that disagrees with
 * the body is a 400.
 */
export const CONSTRAINT_HEADERS = {
  zdr: "x-provider-zdr",
  aci_verified: "x-provider-aci-verified",
  aci_session_ids: "x-provider-aci-session-ids",
} as const;

function headerBool(headers: Headers, name: string): boolean | undefined {
  const v = headers.get(name);
  if (v === null) return undefined;
  if (v === "true") return true;
  if (v === "false") return false;
  throw badParam(name, `${name} must be 'true' or 'false'`);
}

function headerIds(headers: Headers, name: string): string[] | undefined {
  const v = headers.get(name);
  if (v === null) return undefined;
  const ids = v.split(",").map((s) => s.trim());
  if (ids.some((id) => id === "")) {
    throw badParam(name, `${name} must be a comma-separated list of session ids`);
  }
  if (ids.length > MAX_SESSION_IDS) {
    throw badParam(name, `${name} may list at most ${MAX_SESSION_IDS} session ids`);
  }
  return ids;
}

function sameValue(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b)) {
    const sa = new Set(a);
    return b.every((x) => sa.has(x)) && new Set(b).size === sa.size;
  }
  return a === b;
}

/** The body's `provider` block with the constraint headers merged in; a disagreement is a 400. */
function withConstraintHeaders(provider: unknown, headers: Headers): unknown {
  const fromHeaders: Record<string, unknown> = {};
  const zdr = headerBool(headers, CONSTRAINT_HEADERS.zdr);
  if (zdr !== undefined) fromHeaders.zdr = zdr;
  const verified = headerBool(headers, CONSTRAINT_HEADERS.aci_verified);
  if (verified !== undefined) fromHeaders.aci_verified = verified;
  const ids = headerIds(headers, CONSTRAINT_HEADERS.aci_session_ids);
  if (ids !== undefined) fromHeaders.aci_session_ids = ids;
  if (Object.keys(fromHeaders).length === 0) return provider;
  if (provider === undefined || provider === null) return fromHeaders;
  if (typeof provider !== "object" || Array.isArray(provider)) return provider; // refused below
  const merged: Record<string, unknown> = { ...provider };
  for (const [k, v] of Object.entries(fromHeaders)) {
    const inBody = merged[k];
    if (inBody !== undefined && inBody !== null && !sameValue(inBody, v)) {
      const header = CONSTRAINT_HEADERS[k as keyof typeof CONSTRAINT_HEADERS];
      throw badParam(header, `${header} disagrees with provider.${k} in the body; send one`);
    }
    merged[k] = v;
  }
  return merged;
}

/** Validate the raw `provider` value of a request body together with the routing headers. */
// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
export function parseRouting(bodyProvider: unknown, headers: Headers): RoutingConstraints {
  const provider = withConstraintHeaders(bodyProvider, headers);
  const c: RoutingConstraints = {
    zdr: false,
    aciVerified: false,
    aciSessionIds: null,
    forcedProvider: null,
    verificationWaived: false,
    only: null,
    ignore: [],
    order: null,
    allowFallbacks: true,
  };
  if (provider !== undefined && provider !== null) {
    if (typeof provider !== "object" || Array.isArray(provider)) {
      throw badParam("provider", "provider must be an object");
    }
    const p = provider as Record<string, unknown>;
    for (const k of Object.keys(p)) {
      if (IMPLEMENTED.has(k)) continue;
      const name = `provider.${k.slice(0, 60)}`;
      if (NOT_IMPLEMENTED.has(k)) {
        throw badParam(
          name,
          `${name} is an OpenRouter provider preference this gateway does not implement; remove it`,
        );
      }
      throw badParam(
        name,
        k.startsWith("aci_")
          ? `unknown attestation constraint ${name}`
          : `unknown member ${name} of the provider block (members are case-sensitive: ${
            [...IMPLEMENTED].join(", ")
          })`,
      );
    }
    c.zdr = optionalBool(p.zdr, "provider.zdr");
    if (c.zdr && (bodyProvider as Record<string, unknown> | null | undefined)?.zdr !== true) {
      c.zdrParam = CONSTRAINT_HEADERS.zdr; // from the header alone
    }
    if (p.data_collection !== undefined && p.data_collection !== null) {
      if (p.data_collection !== "deny" && p.data_collection !== "allow") {
        throw badParam("provider.data_collection", "data_collection must be 'deny' or 'allow'");
      }
      // OpenRouter's "deny": only providers that do not retain or train on data.
      if (p.data_collection === "deny" && !c.zdr) {
        c.zdr = true;
        c.zdrParam = "provider.data_collection";
      }
    }
    c.only = optionalNames(p.only, "provider.only");
    c.ignore = optionalNames(p.ignore, "provider.ignore") ?? [];
    c.order = optionalNames(p.order, "provider.order");
    if (p.allow_fallbacks !== undefined && p.allow_fallbacks !== null) {
      c.allowFallbacks = optionalBool(p.allow_fallbacks, "provider.allow_fallbacks");
    }
    const verified = p.aci_verified;
    c.aciVerified = optionalBool(verified, "provider.aci_verified");
    if (p.aci_session_ids !== undefined) {
      const ids = p.aci_session_ids;
      if (!Array.isArray(ids)) {
        throw badParam("provider.aci_session_ids", "aci_session_ids must be an array");
      }
      if (ids.length > MAX_SESSION_IDS) {
        throw badParam(
          "provider.aci_session_ids",
          `aci_session_ids may list at most ${MAX_SESSION_IDS} session ids`,
        );
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
      });
      // A string that is not a session id matches no channel: that is the spec's 503
      // `session_not_accepted` (selectCandidates), not a 400.
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

function optionalNames(v: unknown, param: string): string[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v) || v.length > 64) {
    throw badParam(param, `${param} must be an array of provider names`);
  }
  v.forEach((x, i) => {
    if (typeof x !== "string") throw badParam(`${param}[${i}]`, "provider names are strings");
  });
  return v as string[];
}
