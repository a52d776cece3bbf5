/**
 * Configuration tweaks for receipt tests that need to know which upstream
 * serves a request, whatever the harness's verification state: route the
 * shared models only to the plain (non-confidential) demo provider, or add a
 * second plain provider as a failover target.
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
