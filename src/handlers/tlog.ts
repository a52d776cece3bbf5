/**
 * The transparency log's HTTP surface: the C2SP tlog-tiles resources under
 * `/v1/aci/log/` (public, no key: entries are digests only), a consistency
 * proof for convenience, and a receipt's inclusion proof (same access rule as
 * the receipt). Shapes: /work/team/CONTRACTS.md and docs/decisions/.
 */
import type { AccountDeps, AttestationDeps, ClockDeps, RecordDeps } from "./context.ts";
import { GatewayError, jsonResponse, type Params } from "../http/mod.ts";
import { b64, jcs, ownBytes, parseTilePath, type Receipt, receiptEntry } from "../aci/mod.ts";
import { callerDigest } from "./receipts.ts";

/** What this module uses of the gateway's context. */
type Deps = ClockDeps & RecordDeps & AccountDeps & AttestationDeps;

/** How many path segments a tile path may have after `tile/` (level, up to 6 index parts, `.p`, W). */
export const TILE_SEGMENTS = 8;
const IMMUTABLE = "public, max-age=31536000, immutable";
/** Only with witnesses required can a log with entries have nothing to serve. */
const NO_CHECKPOINT = "the log has no checkpoint to serve yet: none is cosigned by the " +
  "witnesses its configuration requires (they are asked again every few seconds)";

export async function getCheckpoint(_req: Request, ctx: Deps): Promise<Response> {
  const cp = await ctx.tlog.checkpoint();
  if (cp === null) throw pending(NO_CHECKPOINT);
  return new Response(cp.checkpoint, {
    headers: {
      "content-type": "text/plain; charset=utf-8",
      // Mutable: a checkpoint a client caches must not be older than a few seconds.
      "cache-control": "public, max-age=1",
    },
  });
}

export async function getTile(req: Request, ctx: Deps): Promise<Response> {
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

async function servedSize(ctx: Deps): Promise<{ size: number; checkpoint: string }> {
  const cp = await ctx.tlog.checkpoint();
  if (cp === null) throw pending(NO_CHECKPOINT);
  return { size: cp.size, checkpoint: cp.checkpoint };
}

export async function getConsistency(req: Request, ctx: Deps): Promise<Response> {
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
  ctx: Deps,
  id: string,
): Promise<{ receipt: Receipt; index: number }> {
  const { receipt } = await receiptOf(req, ctx, id);
  const index = await indexOf(ctx, receipt);
  if (index === null) throw pending("the receipt is not in the log yet");
  return { receipt, index };
}

async function receiptOf(
  req: Request,
  ctx: Deps,
  id: string,
): Promise<{ receipt: Receipt; index: null }> {
  try {
    return { receipt: await ctx.receipts.get(id, await callerDigest(req, ctx)), index: null };
  } catch (e) {
    if (e instanceof GatewayError && e.kind === "not_found") {
      throw new GatewayError("receipt_not_found", "no receipt with this id");
    }
    throw e;
  }
}

function indexOf(ctx: Deps, receipt: Receipt): Promise<number | null> {
  return ctx.tlog.leafIndex(receiptEntry(jcs(receipt)), receipt.served_at);
}

/** The longest `?wait=` an inclusion request may hold (ms). */
export const INCLUSION_WAIT_MAX_MS = 5_000;

function waitParam(url: URL): number | null {
  const v = url.searchParams.get("wait");
  if (v === null) return null;
  if (!/^(0|[1-9][0-9]{0,5})$/.test(v) || Number(v) > INCLUSION_WAIT_MAX_MS) {
    throw new GatewayError(
      "invalid_request",
      `wait must be milliseconds from 0 to ${INCLUSION_WAIT_MAX_MS}`,
      { param: "wait" },
    );
  }
  return Number(v);
}

/**
 * The receipt's inclusion proof. With `?wait=ms`, a receipt not yet in a signed checkpoint
 * holds the request until it is (woken by an append, ours or another replica's: tlog/waiters.ts)
 * or the wait ends, then answers as without it; so a client asks once instead of polling.
 */
export async function getInclusion(
  req: Request,
  ctx: Deps,
  params: Params,
): Promise<Response> {
  const url = new URL(req.url);
  const wait = waitParam(url);
  sizeParam(url, "tree_size"); // a malformed one is a 400 at once, not after the wait
  if (!wait) return await inclusionAnswer(ctx, await receiptLeaf(req, ctx, params.id), url);
  const end = ctx.monotonic() + wait;
  // The receipt (and the caller's right to it) is looked up once; only its index is re-read.
  let leaf: { receipt: Receipt; index: number | null } | null = null;
  for (;;) {
    const since = ctx.tlog.waiters.tick;
    try {
      if (leaf === null) leaf = await receiptOf(req, ctx, params.id);
      if (leaf.index === null) leaf.index = await indexOf(ctx, leaf.receipt);
      if (leaf.index === null) throw pending("the receipt is not in the log yet");
      return await inclusionAnswer(ctx, { index: leaf.index }, url);
    } catch (e) {
      if (!(e instanceof GatewayError) || e.kind !== "log_pending") throw e;
      const left = end - ctx.monotonic();
      // Past the cap, on shutdown or when the client left: today's answer, at once.
      if (left <= 0 || await ctx.tlog.waiters.wait(since, left, req.signal) !== "changed") {
        throw e;
      }
    }
  }
}

async function inclusionAnswer(
  ctx: Deps,
  { index }: { index: number },
  url: URL,
): Promise<Response> {
  const served = await servedSize(ctx);
  const asked = sizeParam(url, "tree_size");
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
