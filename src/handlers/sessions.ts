/**
 * `GET /v1/aci/sessions/{session_id}` (the full, immutable record: its
 * SHA-256 over JCS is the id) and `GET /v1/aci/sessions?upstream_name=&model=`
 * (current sessions, entries with `session_id` and without `evidence.data`).
 * Bearer authentication, as the spec asks of attested-session requests.
 */
import type { AccountDeps, ConfigDeps, UpstreamDeps } from "./context.ts";
import { badParam, GatewayError, jsonResponse, type Params } from "../http/mod.ts";
import { authenticateCaller } from "./auth.ts";

/** What this module uses of the gateway's context. */
type Deps = ConfigDeps & UpstreamDeps & AccountDeps;

export async function getSession(
  req: Request,
  ctx: Deps,
  params: Params,
): Promise<Response> {
  // Missing, bad, unknown or revoked key: 401 `invalid_api_key`, as on the inference surface.
  await authenticateCaller(req, ctx);
  if (!/^[0-9a-f]{64}$/.test(params.id)) {
    throw badParam("session_id", "session ids are 64 lowercase hex characters");
  }
  const doc = await ctx.sessions.get(params.id);
  if (!doc) throw new GatewayError("not_found", "no attested session with this id");
  return jsonResponse(doc);
}

export async function listSessions(req: Request, ctx: Deps): Promise<Response> {
  await authenticateCaller(req, ctx);
  const q = new URL(req.url).searchParams;
  const one = (name: string): string | null => {
    const all = q.getAll(name);
    if (all.length > 1) throw badParam(name, `${name} may be given once`);
    return all[0] ?? null;
  };
  const upstream = one("upstream_name");
  const model = one("model");
  let upstreams: string[] | undefined;
  if (model !== null) {
    let routes: { provider: string }[];
    try {
      routes = ctx.catalog.chatModel(model).config.routes;
    } catch {
      try {
        routes = ctx.catalog.embeddingModel(model).config.routes;
      } catch {
        throw new GatewayError("model_not_found", "model does not exist", { param: "model" });
      }
    }
    upstreams = routes.map((r) => r.provider);
  }
  if (upstream !== null) upstreams = (upstreams ?? [upstream]).filter((u) => u === upstream);
  const sessions = await ctx.sessions.listCurrent({ upstreams });
  return jsonResponse({ api_version: "aci/1", sessions });
}
