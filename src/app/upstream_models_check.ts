/**
 * Start-up check of the configuration against the upstreams: each provider
 * that lists its models (`GET /v1/models`, OpenAI's shape) is asked once, and
 * every route naming an upstream model the provider does not list is a warning
 * for the operator. Only a warning: a listing can lag the models served, and an
 * upstream without a listing (404, not JSON, unreachable) is not checked.
 * No prompt is sent; the request carries only the provider's credential.
 */
import type { GatewayConfig, ProviderConfig } from "../config/mod.ts";
import { joinUrl, readBounded, type UpstreamFetch } from "../upstream/mod.ts";

export interface ModelsCheckDeps {
  fetchFor(p: ProviderConfig): UpstreamFetch;
  credential(provider: string): string | undefined;
  log(line: Record<string, unknown>): void;
  timeoutMs: number;
  /** Aborted when the gateway closes. */
  signal: AbortSignal;
}

/** A listing is small; a larger answer is not one and is not read further. */
const MAX_LISTING_BYTES = 4 * 1024 * 1024;

/** The ids an upstream lists, or null when it has no (readable) listing. */
async function listedModels(
  p: ProviderConfig,
  deps: ModelsCheckDeps,
): Promise<Set<string> | null> {
  const signal = AbortSignal.any([AbortSignal.timeout(deps.timeoutMs), deps.signal]);
  const headers: Record<string, string> = { accept: "application/json" };
  const key = deps.credential(p.name);
  if (key) headers.authorization = `Bearer ${key}`;
  try {
    const res = await deps.fetchFor(p)(joinUrl(p.base_url, "/v1/models"), {
      method: "GET",
      headers,
      signal,
      redirect: "manual", // the listing is the upstream's own, not wherever it points
    });
    const text = await readBounded(res, MAX_LISTING_BYTES);
    if (!res.ok) return null;
    const data = (JSON.parse(text) as { data?: unknown }).data;
    if (!Array.isArray(data)) return null;
    const ids = data.map((m) => (m as { id?: unknown })?.id).filter((id) => typeof id === "string");
    return new Set(ids as string[]);
  } catch {
    return null;
  }
}

/** Warns about every route whose upstream model its provider's listing lacks. */
export async function checkUpstreamModels(
  config: GatewayConfig,
  deps: ModelsCheckDeps,
): Promise<{ checked: string[]; missing: { provider: string; upstream_model: string }[] }> {
  const routes = [...config.models, ...config.embedding_models].flatMap((m) =>
    m.routes.map((r) => ({ model: m.id, provider: r.provider, upstream: r.model }))
  );
  const checked: string[] = [];
  const missing: { provider: string; upstream_model: string }[] = [];
  await Promise.all(config.providers.map(async (p) => {
    const mine = routes.filter((r) => r.provider === p.name);
    if (mine.length === 0) return;
    const listed = await listedModels(p, deps);
    if (listed === null) return;
    checked.push(p.name);
    for (const r of mine) {
      if (listed.has(r.upstream)) continue;
      missing.push({ provider: p.name, upstream_model: r.upstream });
      deps.log({
        level: "warn",
        msg: "a route's upstream model is not in its provider's /v1/models",
        provider: p.name,
        upstream_model: r.upstream,
        model: r.model,
        fix: "check models[].routes[].model against the provider's model names",
      });
    }
  }));
  return { checked, missing };
}
