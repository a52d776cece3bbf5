/**
 * The route table: method + path pattern → handler. Patterns are literal
 * segments and `:name` captures (one segment each). Unknown paths answer
 * 404 and known paths with another method 405, both as GatewayErrors.
 */
import { GatewayError } from "./errors.ts";
import type { Params } from "./params.ts";

export type { Params } from "./params.ts";
export type Handler<C> = (req: Request, ctx: C, params: Params) => Promise<Response> | Response;

interface Route<C> {
  method: string;
  segments: string[];
  handler: Handler<C>;
}

export interface Match<C> {
  handler: Handler<C>;
  params: Params;
  /** The pattern matched, for logs (never the raw path, which may carry ids). */
  pattern: string;
}

export class Router<C> {
  #routes: Route<C>[] = [];

  on(method: string, pattern: string, handler: Handler<C>): this {
    this.#routes.push({ method, segments: split(pattern), handler });
    return this;
  }

  /** Find the handler; throws 404/405 GatewayErrors. */
  match(method: string, pathname: string): Match<C> {
    const parts = split(pathname);
    let pathKnown = false;
    for (const r of this.#routes) {
      const params = matchSegments(r.segments, parts);
      if (!params) continue;
      pathKnown = true;
      // HEAD is served by GET handlers; Deno.serve strips the body.
      if (r.method === method || (method === "HEAD" && r.method === "GET")) {
        return { handler: r.handler, params, pattern: "/" + r.segments.join("/") };
      }
    }
    if (pathKnown) {
      const allowed = this.allowedMethods(pathname);
      throw new GatewayError("method_not_allowed", `method ${method} is not allowed on this path`, {
        headers: { Allow: allowed.join(", ") },
      });
    }
    throw new GatewayError("not_found", "no such endpoint");
  }

  /** Every route, as `{ method, pattern }` (the route table, for the API document's test). */
  routes(): { method: string; pattern: string }[] {
    return this.#routes.map((r) => ({ method: r.method, pattern: "/" + r.segments.join("/") }));
  }

  allowedMethods(pathname: string): string[] {
    const parts = split(pathname);
    return [
      ...new Set(this.#routes.filter((r) => matchSegments(r.segments, parts)).map((r) => r.method)),
    ];
  }
}

function split(path: string): string[] {
  return path.split("/").filter((s) => s.length > 0);
}

function matchSegments(pattern: string[], parts: string[]): Params | null {
  if (pattern.length !== parts.length) return null;
  const params: Params = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i];
    if (p.startsWith(":")) {
      let value: string;
      try {
        value = decodeURIComponent(parts[i]);
      } catch {
        return null;
      }
      params[p.slice(1)] = value;
    } else if (p !== parts[i]) return null;
  }
  return params;
}
