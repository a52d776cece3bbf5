/**
 * Configuration tweaks shared by the end-to-end tests: route the shared models
 * only to the plain (non-confidential) demo provider, add a second plain
 * provider as a failover target, or add a dstack-TDX confidential provider
 * (and a model routed only to it).
 */
import type { GatewayConfig } from "../../src/config/schema.ts";

/** Models that can use the plain provider are routed only to it. */
export function plainRoutesOnly(c: GatewayConfig): void {
  for (const m of [...c.models, ...c.embedding_models]) {
    const plain = m.routes.filter((r) => r.provider === "plain");
    if (plain.length > 0) m.routes = plain;
  }
}

/**
 * Adds provider `backup` (the plain demo upstream again, lower priority) and
 * routes `model` to `plain` then `backup`, so failover is deterministic.
 */
export function plainThenBackup(c: GatewayConfig, model: string): void {
  const plain = c.providers.find((p) => p.name === "plain");
  if (!plain) throw new Error("no plain provider to copy");
  c.providers.push({ ...plain, name: "backup", priority: plain.priority - 1 });
  const m = c.models.find((x) => x.id === model);
  if (!m) throw new Error(`no model ${model}`);
  m.routes = [{ provider: "plain", model: "demo-chat" }, {
    provider: "backup",
    model: "demo-chat",
  }];
}

/**
 * Adds the confidential provider `tdx` (verifier `dstack-tdx`, any MRTD and
 * compose hash) at `url`, trusting `caPem`, and — unless `model` is false —
 * the model `tee/model` routed only to it.
 */
export function addDstackTdxProvider(
  c: GatewayConfig,
  url: string,
  caPem: string,
  opts: { requireGpu?: boolean; model?: boolean } = {},
): void {
  c.providers.push({
    name: "tdx",
    base_url: url,
    zdr: true,
    priority: 10,
    timeout_ms: 5000,
    native_formats: [],
    confidential: {
      verifier: "dstack-tdx",
      tls_ca_pem: caPem,
      allowed_mrtd: [],
      allowed_compose_hashes: [],
      session_ttl_seconds: 3600,
      reverify_margin_seconds: 300,
      ...(opts.requireGpu ? { require_gpu: true } : {}),
    },
  });
  if (opts.model === false) return;
  c.models.push({
    ...c.models[0],
    id: "tee/model",
    aliases: [],
    routes: [{ provider: "tdx", model: "demo-chat" }],
  });
}
