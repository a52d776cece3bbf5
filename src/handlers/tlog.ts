/**
 * The transparency log's HTTP surface: the C2SP tlog-tiles resources under
 * `/v1/aci/log/` (public, no key: entries are digests only), a consistency
 * proof for convenience, and a receipt's inclusion proof (same access rule as
 * the receipt). Shapes: /work/team/CONTRACTS.md and docs/decisions/.
 */
import type { GatewayContext } from "./context.ts";
import { GatewayError } from "../http/errors.ts";
import type { Params } from "../http/params.ts";
import { jsonResponse } from "../http/json.ts";
import { parseTilePath } from "../aci/merkle.ts";
import { b64 } from "../aci/note.ts";
import { jcs } from "../aci/jcs.ts";
import { receiptEntry } from "../aci/log_entry.ts";
import type { Receipt } from "../aci/receipt.ts";
import { callerDigest } from "./receipts.ts";
import { ownBytes } from "../aci/bytes.ts";

/** How many path segments a tile path may have after `tile/` (level, up to 6 index parts, `.p`, W). */
export const TILE_SEGMENTS = 8;
const IMMUTABLE = "public, max-age=31536000, immutable";

export async function getCheckpoint(_req: Request, ctx: GatewayContext): Promise<Response> {
  const cp = await ctx.tlog.checkpoint();
  if (cp === null) throw pending("the log has no checkpoint yet");
  return new Response(cp.checkpoint, {
    headers: {
      "content-type": "text/plain; charset=utf-8",
      // Mutable: a checkpoint a client caches must not be older than a few seconds.
      "cache-control": "public, max-age=1",
    },
  });
}

export async function getTile(req: Request, ctx: GatewayContext): Promise<Response> {
  const path = new URL(req.url).pathname;
  const at = path.indexOf("/tile/");
  const ref = at < 0 ? null : parseTilePath(path.slice(at + 6).split("/"));
  if (ref === null) throw new GatewayError("not_found", "no such tile path");
  const bytes = await ctx.tlog.tile(ref, ref.entries);
  if (bytes === null) throw new GatewayError("not_found", "no such tile in the log");
  return new Response(ownBytes(bytes), {
    headers: { "content-type": "application/octet-stream", "cache-control": IMMUTABLE },
  });
}

function sizeParam(url: URL, name: string): number | null {
  const v = url.searchParams.get(name);
  if (v === null) return null;
  if (!/^(0|[1-9][0-9]{0,15})$/.test(v) || !Number.isSafeInteger(Number(v))) {
    throw new GatewayError("invalid_request", `${name} must be a tree size`, { param: name });
  }
  return Number(v);
}

async function servedSize(ctx: GatewayContext): Promise<{ size: number; checkpoint: string }> {
  const cp = await ctx.tlog.checkpoint();
  if (cp === null) throw pending("the log has no checkpoint yet");
  return { size: cp.size, checkpoint: cp.checkpoint };
}

export async function getConsistency(req: Request, ctx: GatewayContext): Promise<Response> {
  const url = new URL(req.url);
  const from = sizeParam(url, "from");
  const to = sizeParam(url, "to");
  if (from === null || to === null) {
    throw new GatewayError("invalid_request", "from and to are required", { param: "from" });
  }
  // Up to the latest signed head (witnesses check a checkpoint before it is served).
  const size = (await ctx.tlog.head())?.size ?? 0;
  if (from > to || to > size) {
    throw new GatewayError("invalid_request", `need from ≤ to ≤ ${size} (the log's size)`, {
      param: "to",
    });
  }
  const proof = await ctx.tlog.consistency(from, to);
  return jsonResponse({ proof: proof.map(b64) });
}

/** The receipt's log entry and index, or a clear 404/503. */
export async function receiptLeaf(
  req: Request,
  ctx: GatewayContext,
  id: string,
): Promise<{ receipt: Receipt; index: number }> {
  let receipt: Receipt;
  try {
    receipt = await ctx.receipts.get(id, await callerDigest(req, ctx));
  } catch (e) {
    if (e instanceof GatewayError && e.kind === "not_found") {
      throw new GatewayError("receipt_not_found", "no receipt with this id");
    }
    throw e;
  }
  const index = await ctx.tlog.leafIndex(receiptEntry(jcs(receipt)), receipt.served_at);
  if (index === null) throw pending("the receipt is not in the log yet");
  return { receipt, index };
}

export async function getInclusion(
  req: Request,
  ctx: GatewayContext,
  params: Params,
): Promise<Response> {
  const { index } = await receiptLeaf(req, ctx, params.id);
  const served = await servedSize(ctx);
  const asked = sizeParam(new URL(req.url), "tree_size");
  const size = asked ?? served.size;
  if (size > served.size) {
    throw new GatewayError(
      "invalid_request",
      `tree_size is above the checkpoint (${served.size})`,
      {
        param: "tree_size",
      },
    );
  }
  if (index >= size) {
    if (asked !== null) {
      throw new GatewayError("invalid_request", "the receipt is not in a tree of that size", {
        param: "tree_size",
      });
    }
    throw pending("the receipt is not in a signed checkpoint yet");
  }
  const proof = await ctx.tlog.inclusion(index, size);
  return jsonResponse({
    origin: ctx.tlog.origin,
    leaf_index: index,
    tree_size: size,
    inclusion_proof: proof.map(b64),
    checkpoint: served.checkpoint,
  });
}

function pending(message: string): GatewayError {
  return new GatewayError("log_pending", message, { headers: { "retry-after": "1" } });
}
