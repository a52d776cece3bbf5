/**
 * The live configuration as the handlers see it (app/live_config.ts
 * implements it): the admin API shows and replaces it, `/healthz` names its
 * version. Its own module, so the context can name it without the handlers.
 */

/** The configuration in force, as operators see it. */
export interface ConfigView {
  version: number;
  digest: string;
  applied_at: string;
  config: unknown;
}

export interface ConfigControl {
  current(): ConfigView;
  /** Validates and applies a configuration's JSON text; a GatewayError (400) when refused. */
  applyText(text: string, source: "admin" | "file"): Omit<ConfigView, "config"> & {
    changed: string[];
  };
}
