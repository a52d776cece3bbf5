/**
 * Streamed answers: upstream SSE bytes flow through the format's translator
 * to the client as they arrive (pull-driven, so a slow client slows the
 * upstream read instead of buffering). Both directions are hashed
 * incrementally. The terminator is released only after the receipt and the
 * debit are durably committed; a client disconnect aborts the upstream and
 * still finalizes the receipt over what was written.
 */
import { GatewayError } from "../http/errors.ts";
import { BodyHasher } from "../aci/digest.ts";
import { SseDecoder } from "../formats/sse.ts";
import type { ReceiptRecorder } from "../receipts/recorder.ts";
import { responseIdOf, StreamIdFinder } from "../receipts/response_id.ts";
import { chunkReader, drainRest } from "../upstream/chunk_reader.ts";
import { bodySourceOf } from "../upstream/h1_client.ts";
import type { KvWrite } from "../store/group_commit.ts";
import type { Settle, TokenUsage, Translator } from "./plan.ts";
import type { GatewayContext } from "./context.ts";
import type { RequestInfo } from "./request_info.ts";

export interface StreamArgs {
  ctx: GatewayContext;
  rec: ReceiptRecorder;
  /** The upstream's answer (only its body is kept: not its headers, for the stream's life). */
  upstream: Response;
  /** Aborts the upstream request (client gone, upstream failed or idle). */
  abortUpstream: (reason?: unknown) => void;
  translator: Translator;
  /** Prompt tokens estimated at admission: billed when the upstream never reports usage. */
  promptEstimate: () => number;
  contentType: string | undefined;
  headers: Headers;
  settle: Settle;
  info: RequestInfo;
  /** Tokens of delivered text, with the model's tokenizer (billing when usage never came). */
  countTokens: (text: string) => number;
  /**
   * The upstream speaks the OpenAI stream format (`data: [DONE]` ends it): a body that ends
   * without `[DONE]` is complete only if a finish reason and the usage chunk (always asked
   * for) arrived; else it was cut, and is an upstream failure.
   */
  openAiUpstream: boolean;
}

const encoder = new TextEncoder();

type Outcome = "completed" | "upstream_failed" | "client_disconnected";

// Long as one closure over a stream's state (its pull, the deadlines the shared ticker reads,
// finish); split, that state would be an object allocated and dereferenced per chunk (hot path).
export function streamResponse(a: StreamArgs): Response {
  // Closures below use these, never `a`: a held stream keeps only what it needs.
  const { ctx, rec, translator, abortUpstream, promptEstimate, settle, info, countTokens } = a;
  const openAiUpstream = a.openAiUpstream;
  if (!a.upstream.body) throw new GatewayError("upstream_error", "upstream sent no stream body");
  const reader = chunkReader(a.upstream.body, undefined, bodySourceOf(a.upstream));
  const received = new BodyHasher();
  const returned = new BodyHasher();
  const limits = ctx.config.limits;
  // One event may not outgrow max_sse_event_bytes (a line that never ends is refused).
  const decoder = new SseDecoder({ maxPendingChars: limits.max_sse_event_bytes });
  const maxStreamBytes = limits.max_upstream_stream_bytes;
  let streamBytes = 0;
  const startedAt = ctx.monotonic();
  // Tokens of the generated text of every choice written to the client so far.
  let deliveredTokens = 0;
  let sawDone = false;
  let sawFinish = false;
  let done = false;
  // chat_id: the id the client sees in the stream, when the upstream gave one.
  let upstreamId: string | null = null;
  const clientId = new StreamIdFinder();

  /**
   * The settlement, which must not throw: a stream that was answered always gets its receipt
   * and releases its reservation. Without an upstream usage report (client left early), the
   * estimate of the prompt and the delivered text's tokens are billed; a reported field that is
   * not a valid count is replaced by them (usage_bounds.ts).
   */
  const settlement = (): readonly KvWrite[] => {
    // The prompt's exact count is made only if read (prompt_tokens.ts).
    const fallback: TokenUsage = {
      get prompt_tokens() {
        return promptEstimate();
      },
      completion_tokens: deliveredTokens,
    };
    try {
      return settle(translator.usage() ?? fallback, fallback);
    } catch (e) {
      ctx.log({ level: "error", request_id: info.requestId, msg: "settlement", error: String(e) });
      try {
        return settle(fallback, fallback);
      } catch {
        return [];
      }
    }
  };

  const finalize = async (outcome: Outcome): Promise<void> => {
    untick();
    // The receipt and the debit, durable in one commit before the stream ends.
    await rec.close({
      kind: "answer",
      receivedHash: received.digest(),
      returnedHash: returned.digest(),
      cut: outcome === "completed" ? undefined : outcome,
      chatId: upstreamId === null ? null : clientId.id ?? upstreamId,
    }, settlement());
    ctx.logRequest(info, 200, outcome);
    if (outcome === "completed" && info.provider) {
      ctx.answered?.({
        provider: info.provider,
        upstreamChatId: upstreamId,
        forwardedHash: rec.forwardedHash,
        receivedHash: received.digest(),
      });
    }
  };

  /** Feed decoded upstream events to the translator; returns text for the client. */
  const translate = (
    events: { data: string; event?: string }[],
  ): { out: string; finished: boolean } => {
    let out = "";
    for (const ev of events) {
      if (ev.data === "[DONE]") {
        sawDone = true;
        return { out, finished: true };
      }
      let chunk: unknown;
      try {
        chunk = JSON.parse(ev.data);
      } catch {
        throw new GatewayError("upstream_error", "upstream sent a malformed stream event");
      }
      if (chunk && typeof chunk === "object" && ("error" in chunk || ev.event === "error")) {
        throw new GatewayError("upstream_error", "upstream reported an error mid-stream");
      }
      if (upstreamId === null) upstreamId = responseIdOf(chunk);
      // Read before the translator (E2EE seals the chunk in place), counted once it is written.
      const generated = generatedText(chunk);
      if (!sawFinish && hasFinish(chunk)) sawFinish = true;
      out += translator.chunk(chunk as never, ev.event);
      if (generated !== "") deliveredTokens += countTokens(generated);
    }
    return { out, finished: false };
  };

  const idleMs = ctx.config.limits.stream_idle_timeout_ms;
  const keepAliveMs = ctx.config.limits.sse_keepalive_ms;
  const keepAlive = translator.keepAlive !== undefined;
  // Deadlines are checked by the shared ticker while an upstream read is pending:
  // silence for `idleMs` fails the stream; silence for `keepAliveMs` sends the
  // format's keep-alive frame (Anthropic `ping`), when it has one. A slow client
  // is never the upstream's silence: no read is pending while it lags.
  let readSince = 0; // when the pending read began; 0 = none pending
  let beatSince = 0; // last keep-alive sent during this read
  let idleError: GatewayError | null = null;
  let ctrl: ReadableStreamDefaultController<Uint8Array> | null = null;
  const totalMs = limits.upstream_body_timeout_ms;
  const untick = ctx.streamTicker.add((now) => {
    if (readSince === 0 || done) return;
    const late = now - startedAt >= totalMs;
    if (late || now - readSince >= idleMs) {
      idleError ??= new GatewayError(
        "upstream_timeout",
        late ? "upstream stream exceeded upstream_body_timeout_ms" : "upstream stream went idle",
      );
      abortUpstream(idleError);
      reader.cancel(idleError).catch(() => {}); // settles the pending read
    } else if (keepAlive && ctrl && now - Math.max(readSince, beatSince) >= keepAliveMs) {
      beatSince = now;
      emit(ctrl, translator.keepAlive!());
    }
  });

  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      ctrl = controller;
    },
    async pull(controller) {
      if (done) return;
      try {
        while (true) {
          // Awaited right here (no helper): a held stream waits in one suspended function.
          readSince = ctx.monotonic();
          beatSince = 0;
          let r: ReadableStreamReadResult<Uint8Array>;
          try {
            r = await reader.read();
          } finally {
            readSince = 0;
          }
          if (idleError) throw idleError;
          if (r.done) {
            const { out } = translate(decoder.end());
            if (openAiUpstream && !sawDone && !(sawFinish && translator.usage() !== undefined)) {
              // Cut short (a clean chunked end or EOF): never relayed as a complete answer.
              if (out) emit(controller, out);
              throw new GatewayError(
                "upstream_error",
                "upstream stream ended before its end marker",
              );
            }
            await finish(controller, out + translator.end(), "completed");
            return;
          }
          streamBytes += r.value.byteLength;
          if (streamBytes > maxStreamBytes) {
            throw new GatewayError(
              "upstream_error",
              "upstream stream exceeded max_upstream_stream_bytes",
            );
          }
          received.update(r.value);
          const { out, finished } = translate(decoder.push(r.value));
          if (finished) {
            drainRest(reader, { maxReads: 4, graceMs: 1_000 });
            await finish(controller, out + translator.end(), "completed");
            return;
          }
          if (out) {
            emit(controller, out);
            return;
          }
        }
      } catch (e) {
        if (done) return;
        if (idleError === null) abortUpstream(e); // the ticker already aborted an idle one
        reader.cancel().catch(() => {});
        const err = idleError ??
          (e instanceof GatewayError
            ? e
            : new GatewayError("upstream_error", "upstream stream failed"));
        await finish(controller, translator.fail(err), "upstream_failed");
      }
    },
    async cancel() {
      if (done) return;
      done = true;
      abortUpstream(new Error("client disconnected"));
      reader.cancel().catch(() => {});
      await finalize("client_disconnected").catch((e) =>
        ctx.log({ level: "error", error: String(e) })
      );
    },
  }, { highWaterMark: 0 });

  function emit(controller: ReadableStreamDefaultController<Uint8Array>, text: string): void {
    const bytes = encoder.encode(text);
    returned.update(bytes);
    clientId.push(text);
    controller.enqueue(bytes);
  }

  async function finish(
    controller: ReadableStreamDefaultController<Uint8Array>,
    tail: string,
    outcome: Outcome,
  ): Promise<void> {
    if (done) return;
    done = true;
    const bytes = encoder.encode(tail);
    returned.update(bytes);
    clientId.push(tail);
    try {
      await finalize(outcome);
    } catch (e) {
      // No durable receipt, so no clean end: the client sees the response fail rather
      // than a terminator that promises a receipt which does not exist.
      ctx.log({
        level: "error",
        request_id: info.requestId,
        msg: "stream receipt not stored",
        error: String(e),
      });
      controller.error(new GatewayError("unavailable", "the receipt could not be stored"));
      return;
    }
    if (bytes.byteLength) controller.enqueue(bytes);
    controller.close();
  }

  a.headers.set("content-type", a.contentType ?? "text/event-stream; charset=utf-8");
  a.headers.set("cache-control", "no-cache");
  info.deferLog = true;
  return new Response(body, { status: 200, headers: a.headers });
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * The generated text one upstream event carries, of every choice: OpenAI chunks (content,
 * reasoning, tool-call arguments, completion text), Anthropic native deltas (text, thinking,
 * tool input) and Responses native `*.delta` events.
 */
function generatedText(chunk: unknown): string {
  if (!isObj(chunk)) return "";
  let text = "";
  const add = (v: unknown) => {
    if (typeof v === "string") text += v;
  };
  const choices = chunk["choices"];
  if (Array.isArray(choices)) {
    for (const c of choices) {
      if (!isObj(c)) continue;
      add(c["text"]);
      const d = c["delta"];
      if (!isObj(d)) continue;
      add(d["content"]);
      add(d["reasoning"]);
      add(d["reasoning_content"]);
      add(d["refusal"]);
      if (Array.isArray(d["tool_calls"])) {
        for (const t of d["tool_calls"]) {
          if (isObj(t) && isObj(t["function"])) {
            add(t["function"]["name"]);
            add(t["function"]["arguments"]);
          }
        }
      }
    }
    return text;
  }
  const d = chunk["delta"];
  if (chunk["type"] === "content_block_delta" && isObj(d)) {
    add(d["text"]);
    add(d["thinking"]);
    add(d["partial_json"]);
  } else if (typeof chunk["type"] === "string" && chunk["type"].endsWith(".delta")) {
    add(d);
  }
  return text;
}

/** Whether an OpenAI chunk ends a choice (a finish reason). */
function hasFinish(chunk: unknown): boolean {
  const choices = isObj(chunk) ? chunk["choices"] : undefined;
  return Array.isArray(choices) &&
    choices.some((c) => isObj(c) && typeof c["finish_reason"] === "string");
}
