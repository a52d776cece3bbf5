/**
 * The one inference pipeline behind all five inference endpoints:
 * authenticate → record `request.received` → validate → route under the
 * client's constraints → admit (rate limit + credits) → forward with failover
 * → answer (whole or streamed) → settle usage and commit the signed receipt
 * in one group commit. Refusals after authentication get a receipt too.
 */
import {
  asGatewayError,
  errorBody,
  errorCodeOf,
  type ErrorFormat,
  GatewayError,
} from "../http/errors.ts";
import {
  type JsonDocument,
  largeBodyTurn,
  parseJsonDocument,
  readBody,
  requireJsonContentType,
} from "../http/body.ts";
import { freezeJson, spliceJson } from "../http/json_splice.ts";
import { sha256Prefixed } from "../aci/digest.ts";
import { newReceiptId } from "../aci/receipt.ts";
import { ReceiptRecorder } from "../receipts/recorder.ts";
import { responseIdOf } from "../receipts/response_id.ts";
import { parseRouting } from "../routing/provider_block.ts";
import { selectCandidates } from "../routing/select.ts";
import { refuseClientSalt, saltDigest, withSalt } from "../routing/cache_salt.ts";
import { forward, type ForwardResult } from "../routing/failover.ts";
import { costNano, type InferencePlan, type Settle } from "./plan.ts";
import { streamResponse } from "./stream_response.ts";
import { type E2eeSession, openE2ee, type OpenedRequest } from "../e2ee/service.ts";
import type { GatewayContext } from "./context.ts";
import type { Admission } from "../accounts/admission.ts";
import type { Authenticator, KeyRecord } from "../accounts/keys.ts";
import type { BodyTicket } from "../http/body_budget.ts";
import type { KvWrite } from "../store/group_commit.ts";
import { dailyUsageWrites } from "../accounts/usage_daily.ts";
import type { RequestInfo } from "./request_info.ts";
import { boundUsage } from "./usage_bounds.ts";
import { countText, FALLBACK_TOKENIZER, type TokenizerName } from "../tokens/count.ts";

export interface InferenceEndpoint {
  endpoint: string;
  errorFormat: ErrorFormat;
  plan(body: unknown, ctx: GatewayContext): InferencePlan;
}

const encoder = new TextEncoder();
const NONE: readonly KvWrite[] = [];

// Defined in its own module so handlers/context.ts can name it without importing the pipeline.
export type { RequestInfo } from "./request_info.ts";

/** Time one phase of a request into `info.phases` (monotonic clock; not the wall clock). */
async function phase<T>(
  ctx: GatewayContext,
  info: RequestInfo,
  name: string,
  f: () => Promise<T>,
): Promise<T> {
  const t0 = ctx.monotonic();
  try {
    return await f();
  } finally {
    info.phases[name] = (info.phases[name] ?? 0) + ctx.monotonic() - t0;
  }
}

// Long as the hot path in order (auth, body, admit, upstream, answer, refusal receipt) sharing one
// request's locals; splitting it would pass them through extra frames and closures per request.
export async function handleInference(
  req: Request,
  ctx: GatewayContext,
  ep: InferenceEndpoint,
  info: RequestInfo,
): Promise<Response> {
  let rec: ReceiptRecorder | null = null;
  let admission: Admission | null = null;
  let account: KeyRecord | null = null;
  let bodyTicket: BodyTicket | null = null;
  /** Refused by pre-admission itself: not charged again to the key's bucket. */
  let refusedUnread = false;
  const headers = new Headers({
    "x-service-trace-id": info.traceId,
    "x-request-id": info.requestId,
  });
  try {
    const key = await ctx.auth.authenticate(credentialHeader(req.headers));
    info.keyId = key.key_id;
    account = key;
    // Signed by the receipt service, committed by the group committer (shared commits:
    // receipts/recorder.ts, ReceiptCommit).
    rec = new ReceiptRecorder(
      newReceiptId(ctx.randomBytes, ctx.now()),
      ep.endpoint,
      "POST",
      ctx.receipts,
      ctx.committer,
    );
    rec.setOwner(key.digest);
    headers.set("x-receipt-id", rec.id);
    info.receiptId = rec.id;
    let wire: Uint8Array;
    try {
      // #15: a key out of requests is refused before its body is read, and bodies being
      // read are bounded in bytes (globally and per key) and in time.
      // #25: nor does a key that cannot pay, or whose refusals filled its bucket.
      try {
        await ctx.preAdmission.admissible(key);
      } catch (e) {
        refusedUnread = true;
        throw e;
      }
      bodyTicket = ctx.bodyBudget.ticket(key.key_id);
      wire = await readBody(req, ctx.config.limits.max_body_bytes, {
        timeoutMs: ctx.config.limits.body_timeout_ms,
        reserve: bodyTicket.reserve,
        after: ctx.deadlines.after,
      });
    } catch (e) {
      // Refused unread (413, unreadable): the receipt says so instead of binding a hash.
      rec.received(null);
      throw e;
    }
    let opened: OpenedRequest | null;
    try {
      if (info.headerError) throw info.headerError;
      requireJsonContentType(req);
      // E2EE v2: decrypt and restore before anything reads the body.
      opened = await phase(
        ctx,
        info,
        "e2ee",
        () => openE2ee(ctx.e2ee, req.headers, ep.endpoint, wire),
      );
    } catch (e) {
      // A refusal before or of the decryption binds the bytes as received.
      rec.received(sha256Prefixed(wire));
      throw e;
    }
    const bytes = opened?.restored ?? wire;
    await largeBodyTurn(bytes);
    const receivedHash = sha256Prefixed(bytes);
    rec.received(receivedHash);
    await largeBodyTurn(bytes);
    // Parsed once; the upstream body is spliced from these bytes (http/json_splice.ts), so the
    // value they are compared by is frozen. E2EE restores its body as a value: serialized.
    let doc: JsonDocument | null = null;
    let body: unknown;
    if (opened) body = opened.body;
    else {
      doc = parseJsonDocument(bytes);
      freezeJson(doc.value);
      body = doc.value;
    }
    if (
      body && typeof body === "object" && typeof (body as { model?: unknown }).model === "string"
    ) {
      rec.setModel((body as { model: string }).model);
    }
    refuseClientSalt(body);
    const plan = ep.plan(body, ctx);
    info.model = plan.modelId;
    const constraints = parseRouting(plan.provider, req.headers);
    const candidates = selectCandidates({
      routes: plan.routes,
      providers: ctx.catalog.providers,
      verification: ctx.verification,
      constraints,
      modelId: plan.modelId,
    });
    const estTokens = plan.estimate.promptTokens + plan.estimate.outputTokens;
    admission = await phase(ctx, info, "admit", () =>
      ctx.admitter.admit(key, {
        tokens: estTokens,
        costNano: costNano(
          {
            prompt_tokens: plan.estimate.promptTokens,
            completion_tokens: plan.estimate.outputTokens,
          },
          plan.pricing,
        ),
        requestId: info.requestId,
      }));
    bodyTicket.release(); // admitted: the body's bytes no longer count as being read
    ctx.preAdmission.admitted(key);
    for (const [k, v] of Object.entries(admission.headers)) headers.set(k, v);
    rec.admitted();
    // Provenance (#31): the canonical model an alias resolved to, in the headers and the receipt.
    const servedModel = ctx.catalog.resolvedId(plan.modelId);
    rec.servedModel(servedModel);

    const attempts: { provider: string; outcome: string }[] = [];
    info.attempts = attempts;
    const bodies = new Map<string, Uint8Array<ArrayBuffer>>();
    const recorder = rec;
    const result = await phase(ctx, info, "upstream", () =>
      forward(
        {
          candidates,
          path: plan.upstreamPath,
          body: (c) => {
            let b = bodies.get(c.routeId);
            if (!b) {
              let upstreamBody = plan.upstreamBody(c);
              if (c.provider.cache_salt && ep.endpoint !== "/v1/embeddings") {
                const salt = ctx.cacheSalt.saltFor(key.digest);
                upstreamBody = withSalt(upstreamBody, salt);
                recorder.cacheSalted(c, saltDigest(salt));
              }
              b = doc
                ? spliceJson(doc, upstreamBody)
                : encoder.encode(JSON.stringify(upstreamBody));
              bodies.set(c.routeId, b);
            }
            return b;
          },
          // The client's bytes sent as they are (nothing changed) were hashed on receipt.
          bodyHash: (b) => b === bytes ? receivedHash : sha256Prefixed(b),
          verificationRequired: constraints.aciVerified,
          // E2EE: an upstream's error text may echo the decrypted prompt; show none of it.
          withholdUpstreamText: opened !== null,
          modelId: plan.modelId,
          partition: key.digest,
          // The client's own signal: a listener on it would live as long as the request.
          signal: req.signal,
          onAttempt: (a) => {
            attempts.push({ provider: a.provider, outcome: a.outcome });
            const p = ctx.catalog.providers.get(a.provider);
            if (p?.confidential && ctx.verification(a.provider)?.verified !== true) {
              ctx.log({
                level: "warn",
                msg: "prompt sent to an unverified confidential upstream " +
                  "(confidential.allow_unverified is set)",
                upstream: a.provider,
                request_id: info.requestId,
              });
            }
          },
        },
        ctx.forward,
        recorder,
      ));
    info.provider = result.candidate.provider.name;
    headers.set("x-serving-provider", info.provider);
    headers.set("x-serving-model", servedModel);
    bodies.clear(); // the prompt's bytes are not kept for the answer's life
    const settle = settlementFor(admission, plan, info, key.key_id, ctx, rec);
    const e2ee = opened?.session ?? null;
    if (e2ee) { for (const [k, v] of Object.entries(e2ee.headers)) headers.set(k, v); }

    if (plan.stream) {
      // Only what the stream needs from here on: not the plan (it holds the parsed
      // prompt), nor the upstream Response.
      return streamResponse({
        ctx,
        rec,
        upstream: result.response,
        abortUpstream: result.abort,
        translator: e2ee
          ? e2ee.sealStream(plan.translator(result.candidate))
          : plan.translator(result.candidate),
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
    return await wholeResponse(ctx, plan, rec, result, headers, settle, info, e2ee);
  } catch (e) {
    const err = asGatewayError(e);
    info.refusal = err.kind;
    info.errorCode = errorCodeOf(err);
    bodyTicket?.release();
    // Every refusal (not an upstream's or the gateway's own failure) costs the key a request.
    if (account) ctx.preAdmission.note(account, err, err.status < 500 && !refusedUnread);
    if (err.kind === "internal") {
      ctx.log({ level: "error", request_id: info.requestId, error: String(e) });
    }
    const out = encoder.encode(JSON.stringify(errorBody(err, ep.errorFormat)));
    for (const [k, v] of Object.entries(err.headers)) headers.set(k, v);
    headers.set("content-type", "application/json");
    // An error body is plaintext: never marked as E2EE-applied.
    for (const k of ["x-e2ee-applied", "x-e2ee-version", "x-e2ee-algo"]) headers.delete(k);
    // A refusal after authentication still gets a signed, durable receipt, once the
    // body was received (a body refused unread, e.g. 413, has nothing to bind) and
    // unless the failure was the final commit itself (then no receipt can be promised).
    if (rec && rec.started && !rec.closed) {
      try {
        // The admission is released in the same commit (no usage: nothing was served).
        await rec.close(
          { kind: "refusal", reason: err.kind, returnedHash: sha256Prefixed(out) },
          admission
            ? admission.settlement({ promptTokens: 0, completionTokens: 0, costNano: 0n })
            : NONE,
        );
        headers.set("x-receipt-id", rec.servedId);
      } catch {
        headers.delete("x-receipt-id");
        info.receiptId = null;
      }
    } else {
      headers.delete("x-receipt-id");
      info.receiptId = null;
    }
    return new Response(out, { status: err.status, headers });
  }
}

async function wholeResponse(
  ctx: GatewayContext,
  plan: InferencePlan,
  rec: ReceiptRecorder,
  result: ForwardResult,
  headers: Headers,
  settle: Settle,
  info: RequestInfo,
  e2ee: E2eeSession | null,
): Promise<Response> {
  const raw = await result.readAll(); // bounded in size and time; aborted if the client leaves
  const receivedHash = sha256Prefixed(raw);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(raw));
  } catch {
    throw new GatewayError("upstream_error", "upstream returned a body that is not JSON");
  }
  const answer = plan.respond(json, result.candidate);
  // Settled before the answer is encoded: its cost is part of the bytes the receipt binds.
  const writes = settle(plan.usage(json));
  withCost(answer, info.costNano);
  e2ee?.sealWhole(answer);
  const out = encoder.encode(JSON.stringify(answer));
  // chat_id is the id the client holds (translated formats mint their own from the upstream's).
  const upstreamId = plan.chatId(json);
  const chatId = upstreamId === null ? null : responseIdOf(answer) ?? upstreamId;
  // Released only once the receipt and the debit are durable, in one commit.
  await phase(
    ctx,
    info,
    "commit",
    () =>
      rec.close(
        { kind: "answer", receivedHash, returnedHash: sha256Prefixed(out), chatId },
        writes,
      ),
  );
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
function withCost(answer: unknown, nano: bigint | undefined): void {
  if (nano === undefined || !answer || typeof answer !== "object") return;
  const usage = (answer as { usage?: unknown }).usage;
  if (usage && typeof usage === "object" && !Array.isArray(usage)) {
    (usage as Record<string, unknown>).cost = Number(nano) / 1e9;
  }
}

/**
 * The settlement of an admission at the actual usage. Made here rather than as a
 * closure of `handleInference`, whose scope (the plan, the prompt's bytes) it
 * would otherwise keep alive for as long as a stream runs.
 */
function settlementFor(
  admission: Admission,
  plan: InferencePlan,
  info: RequestInfo,
  keyId: string,
  ctx: Pick<GatewayContext, "now" | "log">,
  rec: ReceiptRecorder,
): Settle {
  const { pricing, estimate } = plan;
  const { now, log } = ctx;
  const bounds = {
    promptTokens: estimate.maxPromptTokens,
    completionTokens: estimate.outputTokens,
  };
  // Billed when the upstream reports no usage: the prompt's exact count, made only if read —
  // for a whole answer. A stream bills the admission's figure (the ceiling when that decided):
  // counting at its end would keep the prompt's text alive for as long as it runs.
  // Numbers only: `estimate` itself holds that lazy count (and through it the prompt).
  const exactPrompt = plan.stream ? undefined : estimate.exactPromptTokens;
  const { promptTokens, outputTokens } = estimate;
  const estimated = {
    get prompt_tokens() {
      return exactPrompt ? exactPrompt() : promptTokens;
    },
    completion_tokens: outputTokens,
  };
  return (u, fallback = estimated) => {
    // Numbers from the upstream: valid counts, within what the gateway let it do (#25).
    const b = u === undefined ? null : boundUsage(u, fallback, bounds);
    const usage = b?.usage ?? { prompt_tokens: 0, completion_tokens: 0 };
    if (b && (b.invalid.length > 0 || b.clamped.length > 0)) {
      rec.usageBounded(usage, b.invalid, b.clamped);
      log({
        level: "warn",
        msg: "upstream usage bounded",
        request_id: info.requestId,
        invalid: b.invalid,
        clamped: b.clamped,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
      });
    }
    info.usage = usage;
    const actual = {
      promptTokens: usage.prompt_tokens,
      completionTokens: usage.completion_tokens,
      costNano: costNano(usage, pricing),
    };
    const writes = admission.settlement(actual);
    if (writes.length === 0) return writes; // settled already
    info.costNano = actual.costNano;
    // Per day and model, for GET /v1/usage and the admin API.
    writes.push(...dailyUsageWrites(keyId, info.model ?? "", now(), actual));
    return writes;
  };
}

/**
 * `() => n`, made at module level: a closure made inside `handleInference` would keep its
 * whole scope (the plan, the parsed prompt) alive for as long as a stream holds it.
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
