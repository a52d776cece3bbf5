import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import OpenAI from "openai";
import { type DemoUpstream, startDemoUpstream } from "./upstream.ts";
import { pick, postJson, readSse } from "./sse_test_helpers.ts";

const KEY = "sk-demo-upstream-test";
const NOW_MS = 1_700_000_000_123;
const TOOLS = [{
  type: "function" as const,
  function: {
    name: "lookup",
    description: "look something up",
    parameters: { type: "object", properties: { query: { type: "string" } } },
  },
}];

async function withUpstream(
  fn: (u: DemoUpstream, sdk: OpenAI) => Promise<void>,
  opts: { models?: string[]; embeddingDefaultDims?: number } = {},
): Promise<void> {
  const u = await startDemoUpstream({ name: "t", apiKey: KEY, now: () => NOW_MS, ...opts });
  const sdk = new OpenAI({ baseURL: u.url + "/v1", apiKey: KEY, maxRetries: 0 });
  try {
    await fn(u, sdk);
  } finally {
    await u.close();
  }
}

Deno.test("SDK: non-streamed chat completion", async () => {
  await withUpstream(async (u, sdk) => {
    const res = await sdk.chat.completions.create({
      model: "demo-chat",
      messages: [{ role: "system", content: "be nice" }, { role: "user", content: "hello world" }],
    });
    assert.equal(res.object, "chat.completion");
    assert.equal(res.id, "chatcmpl-t-1");
    assert.equal(res.created, Math.floor(NOW_MS / 1000));
    assert.equal(res.model, "demo-chat");
    assert.equal(res.choices[0]?.message.content, "Echo: hello world");
    assert.equal(res.choices[0]?.finish_reason, "stop");
    assert.deepEqual(res.usage, { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 });
    assert.equal(u.stats.byPath["/v1/chat/completions"], 1);
    assert.equal(u.stats.lastHeaders?.authorization, `Bearer ${KEY}`);
    assert.equal(pick(u.stats.lastBody, "messages", 1, "content"), "hello world");
  });
});

Deno.test("SDK: streamed chat, with and without include_usage", async () => {
  await withUpstream(async (_u, sdk) => {
    const messages = [{ role: "user" as const, content: "one two three" }];
    const withUsage = await sdk.chat.completions.create({
      model: "demo-chat",
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const c of withUsage) chunks.push(c);
    assert.equal(chunks[0]?.choices[0]?.delta.role, "assistant");
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    assert.equal(text, "Echo: one two three");
    assert.equal(chunks.filter((c) => c.choices[0]?.delta.content).length, 4, "one token a chunk");
    const finish = chunks.findIndex((c) => c.choices[0]?.finish_reason === "stop");
    assert.equal(finish, chunks.length - 2, "usage chunk follows the finish chunk");
    assert.deepEqual(chunks.at(-1)?.choices, []);
    assert.deepEqual(chunks.at(-1)?.usage, {
      prompt_tokens: 3,
      completion_tokens: 4,
      total_tokens: 7,
    });

    const noUsage = await sdk.chat.completions.create({
      model: "demo-chat",
      messages,
      stream: true,
    });
    const plain = [];
    for await (const c of noUsage) plain.push(c);
    assert.ok(plain.every((c) => c.usage === undefined || c.usage === null));
    assert.equal(plain.at(-1)?.choices[0]?.finish_reason, "stop");
  });
});

Deno.test("SDK: max_tokens truncation gives finish_reason length, streamed or not", async () => {
  await withUpstream(async (_u, sdk) => {
    const messages = [{ role: "user" as const, content: "a b c d e f" }];
    const res = await sdk.chat.completions.create({ model: "demo-chat", messages, max_tokens: 2 });
    assert.equal(res.choices[0]?.message.content, "Echo: a");
    assert.equal(res.choices[0]?.finish_reason, "length");
    assert.equal(res.usage?.completion_tokens, 2);
    const stream = await sdk.chat.completions.create({
      model: "demo-chat",
      messages,
      max_completion_tokens: 3,
      stream: true,
    });
    let text = "", finish: string | null = null;
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? "";
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(text, "Echo: a b");
    assert.equal(finish, "length");
  });
});

Deno.test("SDK: tool calls non-streamed and streamed, then the tool-result follow-up", async () => {
  await withUpstream(async (_u, sdk) => {
    const messages = [{ role: "user" as const, content: "please call lookup for Paris" }];
    const res = await sdk.chat.completions.create({ model: "demo-chat", messages, tools: TOOLS });
    const call = res.choices[0]?.message.tool_calls?.[0];
    assert.equal(res.choices[0]?.finish_reason, "tool_calls");
    assert.equal(res.choices[0]?.message.content, null);
    assert.ok(call && call.type === "function");
    assert.equal(call.function.name, "lookup");
    assert.deepEqual(JSON.parse(call.function.arguments), {
      query: "please call lookup for Paris",
    });

    const stream = await sdk.chat.completions.create({
      model: "demo-chat",
      messages: [{ role: "user", content: "weather in Paris" }],
      tools: TOOLS,
      tool_choice: "required",
      stream: true,
    });
    let id = "", name = "", args = "", deltas = 0, finish: string | null = null;
    for await (const c of stream) {
      for (const t of c.choices[0]?.delta.tool_calls ?? []) {
        deltas++;
        id += t.id ?? "";
        name += t.function?.name ?? "";
        args += t.function?.arguments ?? "";
      }
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    assert.ok(id.startsWith("call_"));
    assert.equal(name, "lookup");
    assert.ok(deltas > 2, "arguments arrive in several fragments");
    assert.deepEqual(JSON.parse(args), { query: "weather in Paris" });
    assert.equal(finish, "tool_calls");

    const follow = await sdk.chat.completions.create({
      model: "demo-chat",
      tools: TOOLS,
      messages: [
        ...messages,
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "sunny" },
      ],
    });
    assert.equal(follow.choices[0]?.message.content, "Tool said: sunny");
    assert.equal(follow.choices[0]?.finish_reason, "stop");
  });
});

Deno.test("reasoning_content, non-streamed and streamed before the content", async () => {
  await withUpstream(async (u) => {
    const body = { model: "demo-reasoner", messages: [{ role: "user", content: "why" }] };
    const res = await postJson(u.url + "/v1/chat/completions", body, { apiKey: KEY });
    const json: unknown = await res.json();
    assert.equal(pick(json, "choices", 0, "message", "reasoning_content"), "Considering: why");
    assert.equal(pick(json, "choices", 0, "message", "content"), "Echo: why");
    assert.equal(pick(json, "usage", "completion_tokens_details", "reasoning_tokens"), 2);

    const sse = await readSse(
      await postJson(u.url + "/v1/chat/completions", {
        model: "demo-chat",
        reasoning_effort: "medium",
        stream: true,
        messages: [{ role: "user", content: "why" }],
      }, { apiKey: KEY }),
    );
    const kinds = sse.chunks.map((c) => {
      const d = pick(c, "choices", 0, "delta");
      return pick(d, "reasoning_content") !== undefined
        ? "r"
        : typeof pick(d, "content") === "string" && pick(d, "role") === undefined
        ? "c"
        : "-";
    }).join("");
    assert.equal(kinds, "-rrcc-");
    assert.ok(sse.done);
  });
});

Deno.test("embeddings: SDK default (base64 on the wire) equals float; base64 decodes", async () => {
  await withUpstream(async (u, sdk) => {
    const input = ["first text", "second text"];
    const viaSdk = await sdk.embeddings.create({ model: "demo-embed", input, dimensions: 8 });
    assert.equal(pick(u.stats.lastBody, "encoding_format"), "base64");
    const floatRes = await postJson(u.url + "/v1/embeddings", {
      model: "demo-embed",
      input,
      dimensions: 8,
      encoding_format: "float",
    }, { apiKey: KEY });
    const floats: unknown = await floatRes.json();
    for (const i of [0, 1]) {
      const f = pick(floats, "data", i, "embedding");
      assert.ok(Array.isArray(f));
      assert.equal(f.length, 8);
      assert.deepEqual(Array.from(viaSdk.data[i]?.embedding ?? []), f);
      assert.equal(viaSdk.data[i]?.index, i);
      const norm = Math.sqrt(f.reduce((s: number, x: number) => s + x * x, 0));
      assert.ok(Math.abs(norm - 1) < 1e-5);
    }
    assert.equal(viaSdk.usage.prompt_tokens, 4);

    const b64Res = await postJson(u.url + "/v1/embeddings", {
      model: "demo-embed",
      input: "first text",
      encoding_format: "base64",
    }, { apiKey: KEY });
    const b64 = pick(await b64Res.json(), "data", 0, "embedding");
    assert.equal(typeof b64, "string");
    const bytes = Buffer.from(String(b64), "base64");
    const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4));
    assert.equal(decoded.length, 5, "configured default dimensions");
    const img = await sdk.embeddings.create({
      model: "demo-embed",
      // Multimodal items are not in the SDK's types; the upstream accepts them.
      input: [{
        type: "image_url",
        image_url: { url: "https://x.test/i.png" },
      }] as unknown as string[],
      encoding_format: "float",
    });
    assert.equal(img.data[0]?.embedding.length, 5);
  }, { embeddingDefaultDims: 5 });
});

Deno.test("SDK: legacy completions, streamed and not", async () => {
  await withUpstream(async (_u, sdk) => {
    const res = await sdk.completions.create({ model: "demo-chat", prompt: "say this" });
    assert.equal(res.object, "text_completion");
    assert.equal(res.choices[0]?.text, "Echo: say this");
    assert.equal(res.choices[0]?.finish_reason, "stop");
    assert.deepEqual(res.usage, { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
    const stream = await sdk.completions.create({
      model: "demo-chat",
      prompt: "say this",
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "", usage = null;
    for await (const c of stream) {
      text += c.choices[0]?.text ?? "";
      usage = c.usage ?? usage;
    }
    assert.equal(text, "Echo: say this");
    assert.deepEqual(usage, { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
  });
});

Deno.test("SDK: models list; unknown model and route are OpenAI-style 404s", async () => {
  await withUpstream(async (u, sdk) => {
    const ids = [];
    for await (const m of sdk.models.list()) ids.push(m.id);
    assert.deepEqual(ids, ["m-one", "m-two"]);
    await assert.rejects(
      sdk.chat.completions.create({ model: "other", messages: [{ role: "user", content: "x" }] }),
      (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === "model_not_found",
    );
    const res = await fetch(u.url + "/v1/nothing", { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(res.status, 404);
    assert.equal(pick(await res.json(), "error", "code"), "not_found");
    const wrongMethod = await fetch(u.url + "/v1/models", {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}` },
    });
    assert.equal(wrongMethod.status, 405);
    await wrongMethod.body?.cancel();
    const badJson = await fetch(u.url + "/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}` },
      body: "{not json",
    });
    assert.equal(badJson.status, 400);
    assert.equal(pick(await badJson.json(), "error", "type"), "invalid_request_error");
  }, { models: ["m-one", "m-two"] });
});

Deno.test("upstream API key: missing or wrong bearer is a 401 envelope", async () => {
  await withUpstream(async (u) => {
    const body = { model: "demo-chat", messages: [{ role: "user", content: "x" }] };
    const none = await postJson(u.url + "/v1/chat/completions", body);
    assert.equal(none.status, 401);
    assert.deepEqual(pick(await none.json(), "error", "code"), "invalid_api_key");
    const wrong = new OpenAI({ baseURL: u.url + "/v1", apiKey: "sk-wrong", maxRetries: 0 });
    await assert.rejects(wrong.models.list(), OpenAI.AuthenticationError);
    assert.equal(u.stats.total, 1, "rejected requests are still counted");
    assert.equal(u.stats.listings, 1, "the listing too, apart");
  });
});

Deno.test("stats count per path and reset in place", async () => {
  await withUpstream(async (u, sdk) => {
    const stats = u.stats;
    await sdk.models.list();
    await sdk.models.list();
    await sdk.completions.create({ model: "demo-chat", prompt: "p" });
    // Listings are counted apart from the inference traffic.
    assert.equal(stats.listings, 2);
    assert.equal(stats.total, 1);
    assert.deepEqual(stats.byPath, { "/v1/completions": 1 });
    assert.equal(stats.lastPath, "/v1/completions");
    assert.equal(stats.lastMethod, "POST");
    u.resetStats();
    assert.equal(stats.total, 0);
    assert.deepEqual(stats.byPath, {});
    assert.equal(stats.lastBody, undefined);
  });
});

Deno.test("determinism: the same request twice gives identical bytes but for the id", async () => {
  await withUpstream(async (u) => {
    const body = {
      model: "demo-reasoner",
      stream: true,
      stream_options: { include_usage: true },
      tools: TOOLS,
      messages: [{ role: "user", content: "call lookup on a b c" }],
    };
    const a = await readSse(await postJson(u.url + "/v1/chat/completions", body, { apiKey: KEY }));
    const b = await readSse(await postJson(u.url + "/v1/chat/completions", body, { apiKey: KEY }));
    assert.ok(a.raw.includes("chatcmpl-t-1") && b.raw.includes("chatcmpl-t-2"));
    const strip = (raw: string) => raw.replaceAll(/t-\d+/g, "t-N");
    assert.equal(strip(a.raw), strip(b.raw));
  });
});

Deno.test("close is idempotent and a closed upstream refuses connections", async () => {
  const u = await startDemoUpstream({ name: "c" });
  assert.match(u.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.ok(u.port > 0);
  await Promise.all([u.close(), u.close()]);
  await assert.rejects(fetch(u.url + "/v1/models"));
});

Deno.test("bad options are rejected", async () => {
  await assert.rejects(startDemoUpstream({ name: "x", models: [] }), RangeError);
  await assert.rejects(startDemoUpstream({ name: "x", embeddingDefaultDims: 0 }), RangeError);
});
