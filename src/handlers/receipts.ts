/** `GET /v1/aci/receipts/{id}`: the bare canonical receipt, served only to the key that made it. */
import type { GatewayContext } from "../app/context.ts";
import { GatewayError } from "../http/errors.ts";
import type { Params } from "../http/router.ts";
import { jsonResponse } from "../http/json.ts";

/** The digest of the presented key, null when no credential was presented; 401 for a bad one. */
export async function callerDigest(req: Request, ctx: GatewayContext): Promise<string | null> {
  const header = req.headers.get("authorization");
  if (header === null) return null;
  try {
    return (await ctx.auth.authenticate(header)).digest;
  } catch {
    throw new GatewayError("unauthorized", "the presented API key is not valid");
  }
}

export async function getReceipt(
  req: Request,
  ctx: GatewayContext,
  params: Params,
): Promise<Response> {
  const receipt = await ctx.receipts.get(params.id, await callerDigest(req, ctx));
  return jsonResponse(receipt);
}
