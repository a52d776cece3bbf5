/**
 * Streamed answers: upstream SSE bytes flow through the format's translator
 * to the client as they arrive (pull-driven, so a slow client slows the
 * upstream read instead of buffering). Both directions are hashed
 * incrementally. The terminator is released only after the receipt and the
 * debit are durably committed; a client disconnect aborts the upstream and
 * still finalizes the receipt over what was written.
 */
import { GatewayError } from "../http/mod.ts";
import { BodyHasher } from "../aci/mod.ts";
import { SseDecoder } from "../formats/mod.ts";
import { type ReceiptRecorder, responseIdOf, StreamIdFinder } from "../receipts/mod.ts";
import { type ChunkReader, drainRest, upstreamBodyReader } from "../upstream/mod.ts";
import type { KvWrite } from "../store/mod.ts";
import type { Settle, TokenUsage, Translator } from "./plan.ts";
import type { ClockDeps, ConfigDeps, LogDeps, RequestPathDeps, UpstreamDeps } from "./context.ts";
import type { RequestInfo } from "./request_info.ts";

/** What this module uses of the gateway's context. */
type Deps = ConfigDeps & ClockDeps & LogDeps & UpstreamDeps & RequestPathDeps;

export interface StreamArgs {
  ctx: Deps;
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

export function streamResponse(a: StreamArgs): Response {
  const reader = upstreamBodyReader(a.upstream);
  if (!reader) throw new GatewayError("upstream_error", "upstream sent no stream body");
  const relay = new StreamRelay(a, reader);
  const body = new ReadableStream<Uint8Array>(relay, { highWaterMark: 0 });
  a.headers.set("content-type", a.contentType ?? "text/event-stream; charset=utf-8");
  a.headers.set("cache-control", "no-cache");
  a.info.deferLog = true;
  return new Response(body, { status: 200, headers: a.headers });
}

/**
 * One stream's state and the source the client's body pulls from: a pull reads the upstream
 * until it has text for the client, translating as it goes. Fields, not a closure's scope, so
 * each step is a method; it keeps what it needs from the arguments, never `a` itself (nor the
 * upstream Response's headers).
 */
class StreamRelay implements UnderlyingDefaultSource<Uint8Array> {
  private readonly ctx: Deps;
  private readonly rec: ReceiptRecorder;
  private readonly translator: Translator;
  private readonly abortUpstream: (reason?: unknown) => void;
  private readonly promptEstimate: () => number;
  private readonly settle: Settle;
  private readonly info: RequestInfo;
  private readonly countTokens: (text: string) => number;
  private readonly openAiUpstream: boolean;
  private readonly reader: ChunkReader;
  private readonly received = new BodyHasher();
  private readonly returned = new BodyHasher();
  private readonly decoder: SseDecoder;
  private readonly maxStreamBytes: number;
  private streamBytes = 0;
  private readonly startedAt: number;
  /** Tokens of the generated text of every choice written to the client so far. */
  private deliveredTokens = 0;
  private sawDone = false;
  private sawFinish = false;
  private done = false;
  /** chat_id: the id the client sees in the stream, when the upstream gave one. */
  private upstreamId: string | null = null;
  private readonly clientId = new StreamIdFinder();
  // Deadlines are checked by the shared ticker while an upstream read is pending:
  // silence for `idleMs` fails the stream; silence for `keepAliveMs` sends the
  // format's keep-alive frame (Anthropic `ping`), when it has one. A slow client
  // is never the upstream's silence: no read is pending while it lags.
  private readonly idleMs: number;
  private readonly keepAliveMs: number;
  private readonly keepAlive: boolean;
  private readonly totalMs: number;
  /** When the pending read began; 0 = none pending. */
  private readSince = 0;
  /** The last keep-alive sent during this read. */
  private beatSince = 0;
  private idleError: GatewayError | null = null;
  private ctrl: ReadableStreamDefaultController<Uint8Array> | null = null;
  private readonly untick: () => void;

  constructor(a: StreamArgs, reader: ChunkReader) {
    this.ctx = a.ctx;
    this.rec = a.rec;
    this.translator = a.translator;
    this.abortUpstream = a.abortUpstream;
    this.promptEstimate = a.promptEstimate;
    this.settle = a.settle;
    this.info = a.info;
    this.countTokens = a.countTokens;
    this.openAiUpstream = a.openAiUpstream;
    this.reader = reader;
    const limits = a.ctx.config.limits;
    // One event may not outgrow max_sse_event_bytes (a line that never ends is refused).
    this.decoder = new SseDecoder({ maxPendingChars: limits.max_sse_event_bytes });
    this.maxStreamBytes = limits.max_upstream_stream_bytes;
    this.startedAt = a.ctx.monotonic();
    this.idleMs = limits.stream_idle_timeout_ms;
    this.keepAliveMs = limits.sse_keepalive_ms;
    this.keepAlive = a.translator.keepAlive !== undefined;
    this.totalMs = limits.upstream_body_timeout_ms;
    this.untick = a.ctx.streamTicker.add((now) => this.tick(now));
  }

  start(controller: ReadableStreamDefaultController<Uint8Array>): void {
    this.ctrl = controller;
  }

  async pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    if (this.done) return;
    const { reader, translator } = this;
    try {
      while (true) {
        // Awaited right here (no helper): a held stream waits in one suspended function.
        this.readSince = this.ctx.monotonic();
        this.beatSince = 0;
        let r: ReadableStreamReadResult<Uint8Array>;
        try {
          r = await reader.read();
        } finally {
          this.readSince = 0;
        }
        if (this.idleError) throw this.idleError;
        if (r.done) {
          const { out } = this.translate(this.decoder.end());
          if (
            this.openAiUpstream && !this.sawDone &&
            !(this.sawFinish && translator.usage() !== undefined)
          ) {
            // Cut short (a clean chunked end or EOF): never relayed as a complete answer.
            if (out) this.emit(controller, out);
            throw new GatewayError("upstream_error", "upstream stream ended before its end marker");
          }
          await this.finish(controller, out + translator.end(), "completed");
          return;
        }
        this.streamBytes += r.value.byteLength;
        if (this.streamBytes > this.maxStreamBytes) {
          throw new GatewayError(
            "upstream_error",
            "upstream stream exceeded max_upstream_stream_bytes",
          );
        }
        this.received.update(r.value);
        const { out, finished } = this.translate(this.decoder.push(r.value));
        if (finished) {
          drainRest(reader, { maxReads: 4, graceMs: 1_000 });
          await this.finish(controller, out + translator.end(), "completed");
          return;
        }
        if (out) {
          this.emit(controller, out);
          return;
        }
      }
    } catch (e) {
      if (this.done) return;
      if (this.idleError === null) this.abortUpstream(e); // the ticker already aborted an idle one
      reader.cancel().catch(() => {});
      const err = this.idleError ??
        (e instanceof GatewayError
          ? e
          : new GatewayError("upstream_error", "upstream stream failed"));
      await this.finish(controller, translator.fail(err), "upstream_failed");
    }
  }

  async cancel(): Promise<void> {
    if (this.done) return;
    this.done = true;
    this.abortUpstream(new Error("client disconnected"));
    this.reader.cancel().catch(() => {});
    await this.finalize("client_disconnected").catch((e) =>
      this.ctx.log({ level: "error", error: String(e) })
    );
  }

  /** The shared ticker's check of this stream's deadlines. */
  private tick(now: number): void {
    const { readSince } = this;
    if (readSince === 0 || this.done) return;
    const late = now - this.startedAt >= this.totalMs;
    if (late || now - readSince >= this.idleMs) {
      this.idleError ??= new GatewayError(
        "upstream_timeout",
        late ? "upstream stream exceeded upstream_body_timeout_ms" : "upstream stream went idle",
      );
      this.abortUpstream(this.idleError);
      this.reader.cancel(this.idleError).catch(() => {}); // settles the pending read
    } else if (
      this.keepAlive && this.ctrl && now - Math.max(readSince, this.beatSince) >= this.keepAliveMs
    ) {
      this.beatSince = now;
      this.emit(this.ctrl, this.translator.keepAlive!());
    }
  }

  /**
   * The settlement, which must not throw: a stream that was answered always gets its receipt
   * and releases its reservation. Without an upstream usage report (client left early), the
   * estimate of the prompt and the delivered text's tokens are billed; a reported field that is
   * not a valid count is replaced by them (usage_bounds.ts).
   */
  private settlement(): readonly KvWrite[] {
    const { promptEstimate, settle } = this;
    // The prompt's exact count is made only if read (prompt_tokens.ts).
    const fallback: TokenUsage = {
      get prompt_tokens() {
        return promptEstimate();
      },
      completion_tokens: this.deliveredTokens,
    };
    try {
      return settle(this.translator.usage() ?? fallback, fallback);
    } catch (e) {
      this.ctx.log({
        level: "error",
        request_id: this.info.requestId,
        msg: "settlement",
        error: String(e),
      });
      try {
        return settle(fallback, fallback);
      } catch {
        return [];
      }
    }
  }

  private async finalize(outcome: Outcome): Promise<void> {
    const { ctx, info, rec } = this;
    this.untick();
    // The receipt and the debit, durable in one commit before the stream ends.
    await rec.close({
      kind: "answer",
      receivedHash: this.received.digest(),
      returnedHash: this.returned.digest(),
      cut: outcome === "completed" ? undefined : outcome,
      chatId: this.upstreamId === null ? null : this.clientId.id ?? this.upstreamId,
    }, this.settlement());
    ctx.logRequest(info, 200, outcome);
    if (outcome === "completed" && info.provider) {
      ctx.answered?.({
        provider: info.provider,
        upstreamChatId: this.upstreamId,
        forwardedHash: rec.forwardedHash,
        receivedHash: this.received.digest(),
      });
    }
  }

  /** Feed decoded upstream events to the translator; returns text for the client. */
  private translate(
    events: { data: string; event?: string }[],
  ): { out: string; finished: boolean } {
    const { translator } = this;
    let out = "";
    for (const ev of events) {
      if (ev.data === "[DONE]") {
        this.sawDone = true;
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
      if (this.upstreamId === null) this.upstreamId = responseIdOf(chunk);
      // Read before the translator (E2EE seals the chunk in place), counted once it is written.
      const generated = generatedText(chunk);
      if (!this.sawFinish && hasFinish(chunk)) this.sawFinish = true;
      out += translator.chunk(chunk as never, ev.event);
      if (generated !== "") this.deliveredTokens += this.countTokens(generated);
    }
    return { out, finished: false };
  }

  private emit(controller: ReadableStreamDefaultController<Uint8Array>, text: string): void {
    const bytes = encoder.encode(text);
    this.returned.update(bytes);
    this.clientId.push(text);
    controller.enqueue(bytes);
  }

  private async finish(
    controller: ReadableStreamDefaultController<Uint8Array>,
    tail: string,
    outcome: Outcome,
  ): Promise<void> {
    if (this.done) return;
    this.done = true;
    const bytes = encoder.encode(tail);
    this.returned.update(bytes);
    this.clientId.push(tail);
    try {
      await this.finalize(outcome);
    } catch (e) {
      // No durable receipt, so no clean end: the client sees the response fail rather
      // than a terminator that promises a receipt which does not exist.
      this.ctx.log({
        level: "error",
        request_id: this.info.requestId,
        msg: "stream receipt not stored",
        error: String(e),
      });
      controller.error(new GatewayError("unavailable", "the receipt could not be stored"));
      return;
    }
    if (bytes.byteLength) controller.enqueue(bytes);
    controller.close();
  }
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
