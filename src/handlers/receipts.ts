/** `GET /v1/aci/receipts/{id}`: the bare canonical receipt, served only to the key that made it. */
import type { AccountDeps, AttestationDeps, RecordDeps } from "./context.ts";
import { GatewayError, jsonResponse, type Params } from "../http/mod.ts";
import { signatureEnvelope } from "../aci/mod.ts";
import { signingAlgo } from "./attestation.ts";
import { authenticateCaller, credentialHeader } from "./auth.ts";

/** What this module uses of the gateway's context. */
type Deps = AttestationDeps & RecordDeps & AccountDeps;

/**
 * The digest of the presented key (Bearer or `x-api-key`), null when no
 * credential was presented; 401 `unauthorized` for a bad one.
 */
export async function callerDigest(req: Request, ctx: Deps): Promise<string | null> {
  if (credentialHeader(req.headers) === null) return null;
  try {
    return (await authenticateCaller(req, ctx)).digest;
  } catch {
    throw new GatewayError("unauthorized", "the presented API key is not valid");
  }
}

export async function getReceipt(
  req: Request,
  ctx: Deps,
  params: Params,
): Promise<Response> {
  const receipt = await ctx.receipts.get(params.id, await callerDigest(req, ctx));
  return jsonResponse(receipt);
}

/**
 * `GET /v1/signature/{id}` (legacy): the same receipt in the vllm-proxy
 * envelope, `text = "<sha256 of request>:<sha256 of response>"` signed with
 * the keyset's secp256k1 (EIP-191) or Ed25519 key. Same access rule.
 */
export async function getLegacySignature(
  req: Request,
  ctx: Deps,
  params: Params,
): Promise<Response> {
  const algo = signingAlgo(new URL(req.url).searchParams);
  const receipt = await ctx.receipts.get(params.id, await callerDigest(req, ctx));
  const hashOf = (type: string) => {
    const e = receipt.event_log.find((x) => x.type === type) as { body_hash?: string } | undefined;
    return e?.body_hash ?? null;
  };
  const reqHash = hashOf("request.received");
  const resHash = [...receipt.event_log].reverse().find((x) => x.type === "response.returned") as
    | { body_hash?: string }
    | undefined;
  if (!reqHash || !resHash?.body_hash) {
    throw new GatewayError("not_found", "this receipt has no response to sign");
  }
  const { keys } = ctx.identity.current();
  return jsonResponse(signatureEnvelope(receipt, reqHash, resHash.body_hash, algo, keys));
}
