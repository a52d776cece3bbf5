/**
 * Self-service for key holders, each answering only for the calling key:
 * `GET /v1/key` (balance, reserved, available, spent, tier, limits and the
 * rate-limit bucket levels, like OpenRouter's key endpoint; admission/key_views.ts)
 * and `GET /v1/usage?from&to` (per UTC day and model). The figures are the
 * admin API's (admission/key_admin.ts).
 */
import { badParam, jsonResponse } from "../http/mod.ts";
import { dayRange, type KeyAdmin, ownKeyView } from "../admission/mod.ts";
import { type Authenticator } from "../keys/mod.ts";
import { authenticateCaller } from "./auth.ts";

/** What the key holder's endpoints need (the gateway's context satisfies it). */
export interface KeyInfoDeps {
  auth: Authenticator;
  keyAdmin: KeyAdmin;
  now(): number;
  noteKey?: (req: Request, keyId: string) => void;
}

export async function getOwnKey(req: Request, ctx: KeyInfoDeps): Promise<Response> {
  const key = await authenticateCaller(req, ctx);
  return jsonResponse(ownKeyView(await ctx.keyAdmin.detailOf(key)));
}

/** `from` / `to` query parameters as a day range; 400 naming the bad one. */
export function rangeFromQuery(req: Request, now: number) {
  const q = new URL(req.url).searchParams;
  for (const name of ["from", "to"]) {
    if (q.getAll(name).length > 1) throw badParam(name, `${name} may be given once`);
  }
  try {
    return dayRange(q.get("from"), q.get("to"), now);
  } catch (e) {
    const msg = (e as Error).message;
    throw badParam(msg.startsWith("to") ? "to" : "from", msg);
  }
}

export async function getOwnUsage(req: Request, ctx: KeyInfoDeps): Promise<Response> {
  const key = await authenticateCaller(req, ctx);
  const range = rangeFromQuery(req, ctx.now());
  return jsonResponse(await ctx.keyAdmin.usage(key.key_id, range));
}
