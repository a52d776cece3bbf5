/**
 * Who is calling: the credential header every endpoint reads and the one way
 * to authenticate a caller. Its own module so the non-inference endpoints need
 * not import the inference pipeline to check a key.
 */
import type { Authenticator, KeyRecord } from "../keys/mod.ts";

/** `Authorization: Bearer <key>`, or the Anthropic SDK's `x-api-key: <key>`. */
export function credentialHeader(h: Headers): string | null {
  const auth = h.get("authorization");
  if (auth !== null) return auth;
  const x = h.get("x-api-key");
  return x === null ? null : `Bearer ${x}`;
}

/**
 * The request's key (401 as `authenticate` refuses one), named in the
 * request's log line: the endpoints outside the inference pipeline use this.
 */
export async function authenticateCaller(
  req: Request,
  ctx: { auth: Authenticator; noteKey?: (req: Request, keyId: string) => void },
): Promise<KeyRecord> {
  const key = await ctx.auth.authenticate(credentialHeader(req.headers));
  ctx.noteKey?.(req, key.key_id);
  return key;
}
