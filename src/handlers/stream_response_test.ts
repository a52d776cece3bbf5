import assert from "node:assert/strict";
import { streamResponse } from "./stream_response.ts";
import { StreamTicker } from "./stream_ticker.ts";
import { ReceiptRecorder } from "../receipts/recorder.ts";
import { createOpenAiStreamPassthrough } from "../formats/openai_stream.ts";
import type { GatewayContext, LogLine } from "./context.ts";
import type { RequestInfo } from "./pipeline.ts";
import type { KvWrite } from "../store/group_commit.ts";

const enc = new TextEncoder();
const EVENT = `data: ${
  JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1,
    model: "m",
    choices: [{ index: 0, delta: { content: "hi" }, finish_reason: null }],
  })
}\n\n`;

/** The parts of the context a stream uses, with a committer that can fail. */
function fakeContext(opts: { commit: (ops: KvWrite[]) => Promise<void>; idleMs?: number }) {
  const logs: LogLine[] = [];
  const ticker = new StreamTicker(5, () => performance.now());
  const ctx = {
    config: {
      limits: { stream_idle_timeout_ms: opts.idleMs ?? 60_000, sse_keepalive_ms: 60_000 },
    },
    committer: { write: opts.commit },
    receipts: { finalize: (): KvWrite[] => [] },
    streamTicker: ticker,
    monotonic: () => performance.now(),
    log: (l: LogLine) => logs.push(l),
    logRequest: () => {},
  } as unknown as GatewayContext;
  return { ctx, logs, ticker };
}

function start(ctx: GatewayContext, upstream: ReadableStream<Uint8Array>) {
  const aborts: unknown[] = [];
  const info: RequestInfo = {
    requestId: "req-1",
    traceId: "t",
    started: 0,
    model: "m",
    provider: "p",
    usage: undefined,
    metadata: undefined,
    phases: {},
  };
  const res = streamResponse({
    ctx,
    rec: new ReceiptRecorder(
      "rcpt-test",
      "/v1/chat/completions",
      "POST",
      ctx.receipts,
      ctx.committer,
    ),
    upstream: new Response(upstream),
    abortUpstream: (r) => aborts.push(r),
    translator: createOpenAiStreamPassthrough({ model: "m", clientWantsUsage: false }),
    promptEstimate: () => 3,
    contentType: undefined,
    headers: new Headers(),
    settle: () => [],
    countTokens: (t) => t.length,
    openAiUpstream: true,
    info,
  });
  return { res, aborts };
}

function sse(...parts: string[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    pull(c) {
      const p = parts.shift();
      if (p === undefined) c.close();
      else c.enqueue(enc.encode(p));
    },
  });
}

Deno.test("stream: events flow, the terminator follows the durable commit, the ticker is left", async () => {
  let committed = 0;
  const { ctx, ticker } = fakeContext({ commit: () => (committed++, Promise.resolve()) });
  const { res } = start(ctx, sse(EVENT, "data: [DONE]\n\n"));
  assert.equal(ticker.size, 1);
  const text = await res.text();
  assert.match(text, /"content":"hi"/);
  assert.ok(text.endsWith("data: [DONE]\n\n"));
  assert.equal(committed, 1);
  assert.equal(ticker.size, 0);
});

Deno.test("stream: a receipt that cannot be stored fails the response, never a clean end", async () => {
  const { ctx, logs, ticker } = fakeContext({
    commit: () => Promise.reject(new Error("disk full")),
  });
  const { res } = start(ctx, sse(EVENT, "data: [DONE]\n\n"));
  const reader = res.body!.getReader();
  let text = "";
  await assert.rejects(async () => {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
  });
  assert.doesNotMatch(text, /\[DONE\]/);
  assert.ok(logs.some((l) => l.msg === "stream receipt not stored"));
  assert.equal(ticker.size, 0);
});

Deno.test("stream: an upstream silent past the idle timeout is cut in-band and aborted", async () => {
  const { ctx, ticker } = fakeContext({ commit: () => Promise.resolve(), idleMs: 40 });
  let cancelled = false;
  const silent = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(enc.encode(EVENT)); // one event, then nothing
    },
    cancel() {
      cancelled = true;
    },
  });
  const { res, aborts } = start(ctx, silent);
  const t0 = performance.now();
  const text = await res.text();
  const ms = performance.now() - t0;
  assert.match(text, /"content":"hi"/);
  assert.match(text, /upstream_timeout/);
  assert.doesNotMatch(text, /\[DONE\]/);
  assert.ok(ms >= 40 && ms < 2_000, `cut after ${ms.toFixed(0)} ms`);
  assert.equal(aborts.length, 1);
  assert.ok(cancelled, "the upstream body was cancelled");
  assert.equal(ticker.size, 0);
});
