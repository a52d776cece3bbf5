import assert from "node:assert/strict";
import { joinUrl, readBounded, sanitizeUpstreamError, sendAttempt } from "./forward.ts";

Deno.test("forward helpers: joinUrl, readBounded, sanitizeUpstreamError", async () => {
  assert.equal(joinUrl("https://h/v1", "/v1/chat/completions"), "https://h/v1/chat/completions");
  assert.equal(joinUrl("https://h/v1/", "/v1/embeddings"), "https://h/v1/embeddings");
  assert.equal(joinUrl("https://h/api", "/v1/messages"), "https://h/api/v1/messages");
  assert.equal(await readBounded(new Response("x".repeat(10_000)), 16), "x".repeat(16));
  assert.equal(await readBounded(new Response(null), 16), "");
  // Known shapes become fixed phrases; nothing of the upstream's text passes.
  assert.equal(
    sanitizeUpstreamError('{"error":"rate limit hit for \'my secret\\u0007"}'),
    "the upstream's rate limit was reached",
  );
  assert.equal(
    sanitizeUpstreamError(JSON.stringify({
      error: { message: "it's 9000 tokens: my secret", code: "context_length_exceeded" },
    })),
    "the prompt and output exceed the upstream model's context length",
  );
  assert.equal(
    sanitizeUpstreamError(JSON.stringify({
      object: "error",
      message: "This model's maximum context length is 4096 tokens. Your prompt: my secret",
    })),
    "the prompt and output exceed the upstream model's context length",
  );
  assert.equal(sanitizeUpstreamError('{"message":"plain my secret"}'), "");
  assert.equal(sanitizeUpstreamError("<html>not json</html>"), "");
  assert.equal(sanitizeUpstreamError(JSON.stringify({ error: { message: "y".repeat(5e5) } })), "");
});

Deno.test("sendAttempt: one request, its answer or why it failed; never a rejection", async () => {
  const seen: { auth: string | null; body: string }[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    seen.push({ auth: req.headers.get("authorization"), body: await req.text() });
    const path = new URL(req.url).pathname;
    if (path === "/ok") return Response.json({ ok: true });
    return new Response('{"error":{"message":"no \\"secret\\" here"}}', { status: 418 });
  });
  const base = `http://127.0.0.1:${server.addr.port}`;
  const limits = { maxBytes: 1 << 20, idleMs: 5_000, totalMs: 10_000 };
  let written = 0;
  const request = (path: string, signal = new AbortController().signal) => ({
    fetch: (url: string, init: RequestInit) => fetch(url, init),
    url: base + path,
    credential: "sk-up",
    body: new TextEncoder().encode("{}"),
    timeoutMs: 5_000,
    signal,
    onWritten: () => written++,
    bodyLimits: limits,
  });
  try {
    const ok = await sendAttempt(request("/ok"));
    assert.ok("response" in ok);
    assert.deepEqual(JSON.parse(new TextDecoder().decode(await ok.readAll())), { ok: true });
    assert.deepEqual(seen[0], { auth: "Bearer sk-up", body: "{}" });
    assert.equal(written, 1, "a fetch without the hook is told once it answered");
    const status = await sendAttempt(request("/teapot"));
    assert.deepEqual(status, { kind: "status", status: 418, detail: "" });
    const gone = new AbortController();
    gone.abort();
    const aborted = await sendAttempt(request("/ok", gone.signal));
    assert.deepEqual(aborted, { kind: "aborted", detail: "client closed the request" });
  } finally {
    await server.shutdown();
  }
});
