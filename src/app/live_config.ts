/**
 * The live part of the configuration: providers, models and embedding
 * models (routes and prices with them) change without a restart, through the
 * admin API or on SIGHUP from the file. A change is validated as at start-up
 * (the schema, the credentials' variables, the catalog built from it) and
 * refused whole when anything else differs — listeners, store, identity,
 * limits, tiers, and the confidential providers, whose verification is set up
 * once at start. Applied, it swaps the context's configuration and catalog:
 * requests read them when they are planned, so a stream in progress keeps
 * the route it started on. Every change is logged and numbered; the version
 * and the digest show in the operator's `/healthz` and `GET /admin/v1/config`.
 */
import { ConfigError, type GatewayConfig, parseConfig } from "../config/mod.ts";
import { Catalog } from "../catalog/mod.ts";
import { FALLBACK_TOKENIZER, prepareTokenizers } from "../tokens/mod.ts";
import { GatewayError } from "../http/mod.ts";
import { jcs, sha256Prefixed } from "../aci/mod.ts";
import { StartupError, unsetKeyVariables } from "./startup_checks.ts";
import type { ConfigControl, ConfigView, GatewayContext, LogLine } from "../handlers/mod.ts";

/** The sections that change live; every other one needs a restart. */
const LIVE = new Set(["providers", "models", "embedding_models"]);

export interface LiveConfig extends ConfigControl {
  /** Applies an already parsed configuration (SIGHUP: main.ts read and parsed the file). */
  apply(next: GatewayConfig, source: "admin" | "file"): ReturnType<ConfigControl["applyText"]>;
}

export function createLiveConfig(deps: {
  ctx: GatewayContext;
  /** Upstream credentials by provider, rebuilt on each change (the forwarder reads it). */
  credentials: Map<string, string | undefined>;
  env: (name: string) => string | undefined;
  log: (line: LogLine) => void;
  now: () => number;
}): LiveConfig {
  const { ctx } = deps;
  let version = 1;
  let digest = digestOf(ctx.config);
  let appliedAt = new Date(deps.now()).toISOString();

  const refuse = (message: string, param: string | null = null): never => {
    throw new GatewayError("invalid_request", message, { param });
  };

  const apply: LiveConfig["apply"] = (next, source) => {
    const cur = ctx.config as unknown as Record<string, unknown>;
    const nxt = next as unknown as Record<string, unknown>;
    for (const key of new Set([...Object.keys(cur), ...Object.keys(nxt)])) {
      if (!LIVE.has(key) && jcs(cur[key] ?? null) !== jcs(nxt[key] ?? null)) {
        refuse(
          `${key} changes only with a restart (live: providers, models, embedding_models)`,
          key,
        );
      }
    }
    if (jcs(confidentialOf(ctx.config)) !== jcs(confidentialOf(next))) {
      refuse(
        "confidential providers change only with a restart (their verification is set up at start)",
        "providers",
      );
    }
    try {
      unsetKeyVariables(next, deps.env);
    } catch (e) {
      if (e instanceof StartupError) refuse(e.message.replace(/^config: /, ""), "providers");
      throw e;
    }
    let catalog: Catalog;
    try {
      catalog = new Catalog(next);
    } catch (e) {
      return refuse(`the catalog cannot be built: ${(e as Error).message}`, "models");
    }
    prepareTokenizers(
      new Set(
        [...next.models, ...next.embedding_models].map((m) => m.tokenizer ?? FALLBACK_TOKENIZER),
      ),
    );
    const changed = [...LIVE].filter((k) => jcs(cur[k] ?? null) !== jcs(nxt[k] ?? null));
    const nextDigest = digestOf(next);
    if (nextDigest !== digest) {
      // One swap: a request planned from here on sees the new catalog and configuration.
      ctx.config = next;
      ctx.catalog = catalog;
      deps.credentials.clear();
      for (const p of next.providers) {
        if (p.api_key_env) deps.credentials.set(p.name, deps.env(p.api_key_env));
      }
      version++;
      digest = nextDigest;
      appliedAt = new Date(deps.now()).toISOString();
    }
    deps.log({
      level: "info",
      msg: "configuration applied",
      source,
      version,
      digest,
      changed,
    });
    return { version, digest, applied_at: appliedAt, changed };
  };

  return {
    apply,
    applyText(text, source) {
      let next: GatewayConfig;
      try {
        next = parseConfig(text);
      } catch (e) {
        if (e instanceof ConfigError) {
          deps.log({ level: "warn", msg: "configuration refused", source, error: e.message });
          return refuse(e.message);
        }
        throw e;
      }
      try {
        return apply(next, source);
      } catch (e) {
        if (e instanceof GatewayError) {
          deps.log({ level: "warn", msg: "configuration refused", source, error: e.message });
        }
        throw e;
      }
    },
    current(): ConfigView {
      return { version, digest, applied_at: appliedAt, config: ctx.config };
    },
  };
}

function digestOf(config: GatewayConfig): string {
  return sha256Prefixed(jcs(config));
}

function confidentialOf(config: GatewayConfig): unknown[] {
  return config.providers.filter((p) => p.confidential)
    .map((p) => p)
    .sort((a, b) => a.name < b.name ? -1 : 1);
}

/**
 * A worker's view of live configuration (docs/decisions/workers.md): a PUT
 * reaches one of the host's workers, so it would change that one alone; it is
 * refused, naming what changes them all (the file and SIGHUP to the
 * supervisor, which forwards it). Reading stays as it is.
 */
export function hostWideOnly(live: LiveConfig, workers: number): LiveConfig {
  return {
    ...live,
    current: () => live.current(),
    apply: (next, source) => live.apply(next, source),
    applyText(text, source) {
      if (source === "file") return live.applyText(text, source);
      throw new GatewayError(
        "invalid_request",
        `this host runs ${workers} workers and a request reaches one of them: edit the ` +
          "configuration file and send SIGHUP to the gateway to change them all",
      );
    },
  };
}
