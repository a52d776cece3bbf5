/**
 * The fifth stage: the upstream's answer to the client, whole or streamed
 * (`stream_response.ts`), settled against the admission and closed into the
 * receipt in one commit.
 */
import { GatewayError } from "../http/mod.ts";
import { sha256Prefixed } from "../aci/mod.ts";
import { responseIdOf } from "../receipts/mod.ts";
import type { ForwardResult } from "../routing/mod.ts";
import { countText, FALLBACK_TOKENIZER, type TokenizerName } from "../tokens/mod.ts";
import type { InferencePlan, Settle } from "./plan.ts";
import type { InferenceState } from "./inference_state.ts";
import { settlementFor } from "./settlement.ts";
import { streamResponse } from "./stream_response.ts";

const encoder = new TextEncoder();

export function answer(
  s: InferenceState,
  plan: InferencePlan,
  result: ForwardResult,
): Promise<Response> | Response {
  const { ctx, info, headers } = s;
  const rec = s.rec!;
  const settle = settlementFor(s.admission!, plan, info, s.key!.key_id, ctx, rec);
  const e2ee = s.opened?.session ?? null;
  if (e2ee) { for (const [k, v] of Object.entries(e2ee.headers)) headers.set(k, v); }
  if (!plan.stream) return wholeResponse(s, plan, result, settle);
  // Only what the stream needs from here on: not the plan (it holds the parsed
  // prompt), nor the upstream Response, nor the request state.
  const translator = plan.translator(result.candidate);
  return streamResponse({
    ctx,
    rec,
    upstream: result.response,
    abortUpstream: result.abort,
    translator: e2ee ? e2ee.sealStream(translator) : translator,
    // The admission's figure, never a lazy exact count: that would hold the prompt's text
    // for the stream's whole life (docs/decisions/prompt-cost.md).
    promptEstimate: constant(plan.estimate.promptTokens),
    contentType: plan.streamContentType,
    headers,
    settle,
    info,
    countTokens: deliveredTokenCounter(plan.tokenizer ?? FALLBACK_TOKENIZER),
    openAiUpstream: OPENAI_STREAM_PATH.test(plan.upstreamPath(result.candidate)),
  });
}

async function wholeResponse(
  s: InferenceState,
  plan: InferencePlan,
  result: ForwardResult,
  settle: Settle,
): Promise<Response> {
  const { ctx, info, headers } = s;
  const rec = s.rec!;
  const raw = await result.readAll(); // bounded in size and time; aborted if the client leaves
  const receivedHash = sha256Prefixed(raw);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(raw));
  } catch {
    throw new GatewayError("upstream_error", "upstream returned a body that is not JSON");
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw new GatewayError("upstream_error", "upstream returned a body that is not a JSON object");
  }
  let out0: unknown;
  let usage: ReturnType<typeof plan.usage>;
  try {
    out0 = plan.respond(json, result.candidate);
    usage = plan.usage(json);
  } catch (e) {
    if (e instanceof GatewayError) throw e;
    // An answer of another shape than its format's (a member of the wrong type, a missing
    // array): the upstream's fault, named as such, not the gateway's 500.
    throw new GatewayError("upstream_error", "upstream returned an answer of the wrong shape");
  }
  // Settled before the answer is encoded: its cost is part of the bytes the receipt binds.
  const writes = settle(usage);
  withCost(out0, info.costNano);
  s.opened?.session?.sealWhole(out0);
  const out = encoder.encode(JSON.stringify(out0));
  // chat_id is the id the client holds (translated formats mint their own from the upstream's).
  const upstreamId = plan.chatId(json);
  const chatId = upstreamId === null ? null : responseIdOf(out0) ?? upstreamId;
  // Released only once the receipt and the debit are durable, in one commit.
  const t0 = ctx.monotonic();
  try {
    await rec.close(
      { kind: "answer", receivedHash, returnedHash: sha256Prefixed(out), chatId },
      writes,
    );
  } finally {
    s.timed("commit", t0);
  }
  ctx.answered?.({
    provider: result.candidate.provider.name,
    upstreamChatId: upstreamId,
    forwardedHash: rec.forwardedHash,
    receivedHash,
  });
  headers.set("content-type", "application/json");
  return new Response(out, { status: 200, headers });
}

/** OpenRouter's `usage.cost` (credits) on an answer that reports usage. */
export function withCost(answer: unknown, nano: bigint | undefined): void {
  if (nano === undefined || !answer || typeof answer !== "object") return;
  const usage = (answer as { usage?: unknown }).usage;
  if (usage && typeof usage === "object" && !Array.isArray(usage)) {
    (usage as Record<string, unknown>).cost = Number(nano) / 1e9;
  }
}

/**
 * `() => n`, made at module level: a closure made inside a stage would keep its
 * whole scope (the request state, the parsed prompt) alive for as long as a stream holds it.
 */
function constant(n: number): () => number {
  return () => n;
}

/** Upstream paths whose streams are OpenAI's format (ended by `data: [DONE]`). */
const OPENAI_STREAM_PATH = /\/(chat\/)?completions$/;

/**
 * Tokens of text delivered to a client, for billing a stream the upstream never reported usage
 * for (#25 item 8). The one call of the token counter on the answer's path: bounded and linear
 * as `src/tokens/` makes it.
 */
function deliveredTokenCounter(tokenizer: TokenizerName): (text: string) => number {
  return (text) => countText(text, tokenizer);
}
