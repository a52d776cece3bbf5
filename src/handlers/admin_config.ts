/**
 * Live configuration through the admin API (#31): `GET /admin/v1/config`
 * shows the configuration in force with its version and digest; `PUT
 * /admin/v1/config` replaces it with a whole new configuration, validated as
 * at start-up, of which only providers, models and embedding models (routes and
 * prices included) may differ — the rest changes with a restart. Streams in
 * progress keep the routes they started on. The change itself is
 * `app/live_config.ts`; SIGHUP (main.ts) applies the configuration file the same way.
 */
import { GatewayError, jsonResponse, readBody, requireJsonContentType } from "../http/mod.ts";
import type { AdminDeps, AdminHandler } from "./admin.ts";
import type { ConfigControl } from "./config_control.ts";

/** A whole configuration is larger than a key's settings. */
const MAX_CONFIG_BODY = 4 * 1024 * 1024;

const control = (deps: AdminDeps): ConfigControl => {
  const c = (deps as AdminDeps & { configControl?: ConfigControl }).configControl;
  if (!c) throw new GatewayError("not_found", "no such endpoint");
  return c;
};

/** `GET /admin/v1/config`. */
export const showConfig: AdminHandler = (_req, ctx) =>
  jsonResponse(control(ctx).current(), 200, { "cache-control": "no-store" });

/** `PUT /admin/v1/config`. */
export const replaceConfig: AdminHandler = async (req, ctx) => {
  requireJsonContentType(req);
  const text = new TextDecoder().decode(await readBody(req, MAX_CONFIG_BODY));
  return jsonResponse(control(ctx).applyText(text, "admin"));
};
