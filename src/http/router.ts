/**
 * Method + path pattern → handler. Patterns are literal segments and `:name`
 * captures (one segment each). A path the table does not serve is a `Miss`
 * naming the methods the path has (none: unknown path); the caller decides
 * what error that is, so the router knows nothing of the gateway's errors.
 */
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

/** No route: `allowed` lists the path's methods (empty when the path is unknown). */
export interface Miss {
  handler: null;
  allowed: readonly string[];
}

// One shared miss for unknown paths: a 404 allocates nothing here.
const UNKNOWN: Miss = Object.freeze({ handler: null, allowed: Object.freeze([]) });

export class Router<C> {
  #routes: Route<C>[] = [];

  on(method: string, pattern: string, handler: Handler<C>): this {
    this.#routes.push({ method, segments: split(pattern), handler });
    return this;
  }

  /** Find the handler, or say why there is none. */
  match(method: string, pathname: string): Match<C> | Miss {
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
    return pathKnown ? { handler: null, allowed: this.allowedMethods(pathname) } : UNKNOWN;
  }

  /** Every route, as `{ method, pattern }` (the route table, for the API document's test). */
  routes(): { method: string; pattern: string }[] {
    return this.#routes.map((r) => ({ method: r.method, pattern: "/" + r.segments.join("/") }));
  }

  /** Each method the path has, once, in registration order. */
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
