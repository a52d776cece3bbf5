/**
 * CORS for browser clients (`cors.allowed_origins`, default none). Keys travel
 * as bearer headers, never cookies, so responses never allow credentials and
 * a preflight may grant any well-formed request header the browser asks for
 * (the OpenAI and Anthropic SDKs send their own `x-stainless-*` /
 * `anthropic-*` headers). Scripts may read the receipt id, the ACI headers,
 * `Server-Timing`, the rate-limit headers and the E2EE v2 response headers.
 */

/** Response headers a script may read (everything a client needs to verify or pace itself). */
export const EXPOSED_HEADERS = [
  "x-receipt-id",
  "x-request-id",
  "x-service-trace-id",
  "x-aci-version",
  "x-aci-keyset-digest",
  "server-timing",
  "retry-after",
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "x-ratelimit-limit-tokens",
  "x-ratelimit-remaining-tokens",
  // E2EE v2: a browser client must see that (and how) the answer was encrypted to it.
  "x-e2ee-applied",
  "x-e2ee-version",
  "x-e2ee-algo",
  // Provenance: who answered, with which model.
  "x-serving-provider",
  "x-serving-model",
] as const;

/** How long a browser may cache a preflight answer (seconds). */
export const PREFLIGHT_MAX_AGE_S = 600;

const HEADER_LIST_RE = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;

export interface CorsPolicy {
  /** The value of `Access-Control-Allow-Origin` for this request's `Origin`, or null. */
  allowOrigin(origin: string | null): string | null;
}

export function corsPolicy(allowed: readonly string[]): CorsPolicy {
  const any = allowed.includes("*");
  // Origins compare case-insensitively in scheme and host; a trailing slash is not an origin.
  const set = new Set(allowed.map((o) => o.toLowerCase()));
  return {
    allowOrigin(origin) {
      if (origin === null || origin === "null") return null;
      if (any) return "*";
      return set.has(origin.toLowerCase()) ? origin : null;
    },
  };
}

/** Is this an `OPTIONS` CORS preflight (rather than an ordinary OPTIONS request)? */
export function isPreflight(req: Request): boolean {
  return req.method === "OPTIONS" && req.headers.has("origin") &&
    req.headers.has("access-control-request-method");
}

/**
 * The answer to a preflight on a known path: 204, with the grant only when
 * the origin is allowed and the method is one the path serves (otherwise the
 * browser sees no grant and refuses the real request).
 */
export function preflightResponse(
  req: Request,
  policy: CorsPolicy,
  pathMethods: readonly string[],
): Response {
  const headers = new Headers({ vary: "Origin" });
  const allow = policy.allowOrigin(req.headers.get("origin"));
  const method = (req.headers.get("access-control-request-method") ?? "").toUpperCase();
  const methods = pathMethods.includes("GET") ? [...pathMethods, "HEAD"] : [...pathMethods];
  if (allow !== null && methods.includes(method)) {
    headers.set("access-control-allow-origin", allow);
    headers.set("access-control-allow-methods", methods.join(", "));
    const asked = (req.headers.get("access-control-request-headers") ?? "").trim();
    if (asked !== "" && asked.length <= 2048 && HEADER_LIST_RE.test(asked)) {
      headers.set("access-control-allow-headers", asked);
    }
    headers.set("access-control-max-age", String(PREFLIGHT_MAX_AGE_S));
  }
  return new Response(null, { status: 204, headers });
}

/** Adds the CORS grant to an actual response when the request's origin is allowed. */
export function decorate(req: Request, res: Response, policy: CorsPolicy): void {
  const origin = req.headers.get("origin");
  if (origin === null) return;
  const allow = policy.allowOrigin(origin);
  res.headers.append("vary", "Origin");
  if (allow === null) return;
  res.headers.set("access-control-allow-origin", allow);
  res.headers.set("access-control-expose-headers", EXPOSED_HEADERS.join(", "));
  // Lets scripts read Server-Timing through the Performance API as well.
  res.headers.set("timing-allow-origin", allow);
}
