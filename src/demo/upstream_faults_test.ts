import assert from "node:assert/strict";
import OpenAI from "openai";
import { type DemoUpstream, startDemoUpstream } from "./upstream.ts";
import { pick, postJson, readSse } from "./sse_test_helpers.ts";

const CHAT = "/v1/chat/completions";
const STREAM_BODY = {
  model: "demo-chat",
  stream: true,
  messages: [{ role: "user", content: "one two three four" }],
};

async function withUpstream(fn: (u: DemoUpstream, sdk: OpenAI) => Promise<void>): Promise<void> {
  const u = await startDemoUpstream({ name: "f" });
  const sdk = new OpenAI({ baseURL: u.url + "/v1", apiKey: "unused", maxRetries: 0 });
  try {
    await fn(u, sdk);
  } finally {
    await u.close();
  }
}

Deno.test("status fault: default envelope, custom body and headers, limited to N requests", async () => {
  await withUpstream(async (u, sdk) => {
    u.setFault({ kind: "status", status: 503, times: 1 });
    const first = await postJson(u.url + CHAT, STREAM_BODY);
    assert.equal(first.status, 503);
    assert.equal(typeof pick(await first.json(), "error", "message"), "string");
    const second = await postJson(u.url + CHAT, STREAM_BODY);
    assert.equal(second.status, 200, "the fault is used up");
    await second.body?.cancel();

    u.setFault({
      kind: "status",
      status: 429,
      body: { error: { message: "slow down", type: "rate_limit_error" } },
      headers: { "retry-after": "7" },
    });
    await assert.rejects(
      sdk.chat.completions.create({
        model: "demo-chat",
        messages: [{ role: "user", content: "x" }],
      }),
      (e: unknown) => e instanceof OpenAI.RateLimitError && e.headers.get("retry-after") === "7",
    );
    u.setFault({ kind: "status", status: 500, body: "plain text oops" });
    const raw = await fetch(u.url + "/v1/models");
    assert.equal(raw.status, 500);
    assert.equal(await raw.text(), "plain text oops");
    u.setFault(null);
    const ok = await fetch(u.url + "/v1/models");
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
  });
});

Deno.test("fault scoped to a path leaves other paths alone", async () => {
  await withUpstream(async (u) => {
    u.setFault({ kind: "status", status: 502, path: CHAT });
    const models = await fetch(u.url + "/v1/models");
    assert.equal(models.status, 200);
    await models.body?.cancel();
    const chat = await postJson(u.url + CHAT, STREAM_BODY);
    assert.equal(chat.status, 502);
    await chat.body?.cancel();
  });
});

Deno.test("hang: no answer until the client's timeout aborts it", async () => {
  await withUpstream(async (u) => {
    u.setFault({ kind: "hang", times: 1 });
    const started = performance.now();
    await assert.rejects(
      postJson(u.url + CHAT, STREAM_BODY, { signal: AbortSignal.timeout(150) }),
      (e: unknown) => e instanceof DOMException && e.name === "TimeoutError",
    );
    assert.ok(performance.now() - started >= 140);
    assert.equal(u.stats.byPath[CHAT], 1, "the request did arrive");
  });
});

Deno.test("hang: close releases hung requests and finishes", async () => {
  const u = await startDemoUpstream({ name: "h" });
  u.setFault({ kind: "hang" });
  const pending = postJson(u.url + CHAT, STREAM_BODY);
  while (u.stats.total === 0) await new Promise((r) => setTimeout(r, 5));
  await u.close();
  const res = await pending;
  assert.equal(res.status, 503);
  await res.body?.cancel();
});

Deno.test("delay: the first byte waits; token_delay: chunks are spaced", async () => {
  await withUpstream(async (u) => {
    u.setFault({ kind: "delay", ms: 120, times: 1 });
    let t0 = performance.now();
    const res = await fetch(u.url + "/v1/models");
    assert.ok(performance.now() - t0 >= 110, "headers arrive after the delay");
    await res.body?.cancel();

    u.setFault({ kind: "token_delay", ms: 30 });
    t0 = performance.now();
    const sse = await readSse(await postJson(u.url + CHAT, STREAM_BODY));
    // 7 events (role, 5 tokens, finish) + [DONE] → 7 gaps.
    assert.ok(performance.now() - t0 >= 7 * 30 - 10);
    assert.equal(sse.chunks.length, 7);
    assert.ok(sse.done);
  });
});

Deno.test("reset_mid_stream: the SDK iteration throws after some chunks", async () => {
  await withUpstream(async (u, sdk) => {
    u.setFault({ kind: "reset_mid_stream", afterChunks: 3 });
    const stream = await sdk.chat.completions.create({
      model: "demo-chat",
      messages: [{ role: "user", content: "one two three four" }],
      stream: true,
    });
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const c of stream) seen.push(c.choices[0]?.delta.content ?? "");
    });
    assert.deepEqual(seen, ["", "Echo:", " one"], "exactly the chunks before the reset");

    // Non-streamed: the body breaks halfway.
    const res = await postJson(u.url + CHAT, { ...STREAM_BODY, stream: false });
    assert.equal(res.status, 200);
    await assert.rejects(res.text());
  });
});

Deno.test("no_done: the body ends cleanly without [DONE]", async () => {
  await withUpstream(async (u, sdk) => {
    u.setFault({ kind: "no_done" });
    const sse = await readSse(await postJson(u.url + CHAT, STREAM_BODY));
    assert.equal(sse.done, false);
    assert.ok(!sse.raw.includes("[DONE]"));
    assert.equal(pick(sse.chunks.at(-1), "choices", 0, "finish_reason"), "stop");
    const stream = await sdk.chat.completions.create({
      model: "demo-chat",
      messages: [{ role: "user", content: "x" }],
      stream: true,
    });
    let n = 0;
    for await (const _ of stream) n++;
    assert.equal(n, 4, "role, two tokens, finish: end of body ends the stream");
  });
});

Deno.test("usage faults: after the finish chunk without asking, or inside the finish chunk", async () => {
  await withUpstream(async (u) => {
    u.setFault({ kind: "usage_after_finish" });
    const after = await readSse(await postJson(u.url + CHAT, STREAM_BODY));
    assert.deepEqual(pick(after.chunks.at(-1), "choices"), []);
    assert.equal(pick(after.chunks.at(-1), "usage", "completion_tokens"), 5);
    assert.equal(pick(after.chunks.at(-2), "choices", 0, "finish_reason"), "stop");

    u.setFault({ kind: "usage_in_finish_chunk" });
    const inFinish = await readSse(
      await postJson(u.url + CHAT, { ...STREAM_BODY, stream_options: { include_usage: true } }),
    );
    const last = inFinish.chunks.at(-1);
    assert.equal(pick(last, "choices", 0, "finish_reason"), "stop");
    assert.equal(pick(last, "usage", "prompt_tokens"), 4);
    assert.ok(inFinish.chunks.every((c) => (pick(c, "choices") as unknown[]).length === 1));
  });
});

Deno.test("keepalive_comments: SSE comments between chunks; the SDK ignores them", async () => {
  await withUpstream(async (u, sdk) => {
    u.setFault({ kind: "keepalive_comments" });
    const sse = await readSse(await postJson(u.url + CHAT, STREAM_BODY));
    assert.equal(sse.comments.length, sse.chunks.length + 1, "one before every event");
    assert.ok(sse.comments.every((c) => c === "PROCESSING"));
    const stream = await sdk.chat.completions.create({
      model: "demo-chat",
      messages: [{ role: "user", content: "a b" }],
      stream: true,
    });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    assert.equal(text, "Echo: a b");
  });
});

Deno.test("empty_tool_calls: every delta carries tool_calls: []", async () => {
  await withUpstream(async (u) => {
    u.setFault({ kind: "empty_tool_calls" });
    const sse = await readSse(await postJson(u.url + CHAT, STREAM_BODY));
    for (const c of sse.chunks) assert.deepEqual(pick(c, "choices", 0, "delta", "tool_calls"), []);
    const whole = await postJson(u.url + CHAT, { ...STREAM_BODY, stream: false });
    assert.deepEqual(pick(await whole.json(), "choices", 0, "message", "tool_calls"), []);
  });
});

Deno.test("close during a slow stream ends it promptly", async () => {
  const u = await startDemoUpstream({ name: "s" });
  u.setFault({ kind: "token_delay", ms: 10_000 });
  const res = await postJson(u.url + CHAT, STREAM_BODY);
  const reader = res.body?.getReader();
  assert.ok(reader);
  const first = await reader.read();
  assert.ok(first.value && first.value.length > 0);
  const t0 = performance.now();
  const closed = u.close();
  await assert.rejects(async () => {
    while (!(await reader.read()).done);
  });
  await closed;
  assert.ok(performance.now() - t0 < 2_000);
});

Deno.test("a client leaving mid-stream does not keep timers alive", async () => {
  await withUpstream(async (u) => {
    u.setFault({ kind: "token_delay", ms: 5_000 });
    const res = await postJson(u.url + CHAT, STREAM_BODY);
    const reader = res.body?.getReader();
    assert.ok(reader);
    await reader.read();
    await reader.cancel();
  });
});
