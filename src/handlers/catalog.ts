/** The public catalog endpoints: chat models, embedding models, the legacy vendor listing. */
import type { ConfigDeps, UpstreamDeps } from "./context.ts";
import { GatewayError, jsonResponse, type Params } from "../http/mod.ts";
import {
  anthropicModelPage,
  isAnthropicStyle,
  parseCatalogFilter,
  toAnthropicModel,
} from "../catalog/mod.ts";

/** What this module uses of the gateway's context. */
type Deps = ConfigDeps & UpstreamDeps;

export function listModels(req: Request, ctx: Deps): Response {
  const params = new URL(req.url).searchParams;
  if (isAnthropicStyle(req.headers)) {
    // Anthropic's cursor parameters are not catalog filters.
    const filters = new URLSearchParams(
      [...params].filter(([k]) => !["limit", "after_id", "before_id"].includes(k)),
    );
    const data = ctx.catalog.listChat(parseCatalogFilter(filters), verifiedNow(ctx));
    return jsonResponse(anthropicModelPage(data, params));
  }
  const f = parseCatalogFilter(params);
  return jsonResponse({ object: "list", data: ctx.catalog.listChat(f, verifiedNow(ctx)) });
}

export function listEmbeddingModels(req: Request, ctx: Deps): Response {
  const f = parseCatalogFilter(new URL(req.url).searchParams);
  return jsonResponse({
    object: "list",
    data: ctx.catalog.listEmbeddings(f, verifiedNow(ctx)),
  });
}

/**
 * `GET /v1/models/<vendor>`: the legacy listing of one confidential vendor's
 * models. A model id with its slash percent-encoded (as `openai.models.retrieve`
 * sends it) is served as that one model.
 */
export function vendorModels(req: Request, ctx: Deps, params: Params): Response {
  if (params.vendor.includes("/")) {
    const [provider, ...rest] = params.vendor.split("/");
    return retrieveModel(req, ctx, { provider, model: rest.join("/") });
  }
  const data = ctx.catalog.vendorModels(params.vendor);
  if (!data) throw new GatewayError("not_found", "no confidential vendor with this name");
  const live = verifiedNow(ctx);
  return jsonResponse({
    object: "list",
    vendor: params.vendor,
    data: data.map((o) => teeNow(o, live)),
  });
}

/**
 * `GET /v1/models/<provider>/<model>`: one model object (what `openai.models.retrieve` asks
 * for; in Anthropic's shape for Anthropic-style requests).
 */
export function retrieveModel(req: Request, ctx: Deps, params: Params): Response {
  const obj = ctx.catalog.chatObject(`${params.provider}/${params.model}`);
  if (!obj) {
    throw new GatewayError("model_not_found", "model does not exist; see GET /v1/models", {
      param: "model",
    });
  }
  if (isAnthropicStyle(req.headers)) return jsonResponse(toAnthropicModel(obj));
  return jsonResponse(teeNow(obj, verifiedNow(ctx)));
}

/** A model object with `is_tee` from the live verification state (as in the listings). */
function teeNow(
  o: Record<string, unknown>,
  verified: (provider: string) => boolean,
): Record<string, unknown> {
  const tee = (o.providers as string[]).some(verified);
  return tee === o.is_tee ? o : { ...o, is_tee: tee };
}

/** Which confidential upstreams have a current verified session (is_tee counts only those). */
function verifiedNow(ctx: Deps): (provider: string) => boolean {
  return (name) => ctx.verification(name)?.verified === true;
}
