/**
 * OpenRouter's SDK (`@openrouter/sdk`, pinned in deno.json) and OpenRouter's
 * request extensions sent through the official `openai` SDK, against the real
 * gateway and the demo upstream (issue 31): `system_fingerprint`,
 * `usage: {include: true}` answered by the gateway (never forwarded),
 * `reasoning_effort` none/xhigh, `stream_options.include_obfuscation`.
 */
import { OpenRouter } from "@openrouter/sdk";
import OpenAI from "openai";
import assert from "node:assert/strict";
import { withRecordedGateway } from "./support/recorded_gateway.ts";
import { OBFUSCATION_BUCKET } from "../src/formats/openai_stream.ts";

Deno.test("OpenRouter SDK: chat.send answers parse (system_fingerprint present), streamed too", async () => {
  await withRecordedGateway(async ({ gw }) => {
    const client = new OpenRouter({ apiKey: gw.apiKey, serverURL: gw.baseURL });
    const r = await client.chat.send({
      chatRequest: {
        model: "demo/echo",
        messages: [{ role: "user", content: "hello router" }],
        maxTokens: 50,
      },
    });
    assert.ok("choices" in r);
    assert.equal(r.choices[0].message.content, "Echo: hello router");
    assert.equal(r.systemFingerprint, null);
    assert.ok(r.usage && r.usage.promptTokens > 0);

    const s = await client.chat.send({
      chatRequest: {
        model: "demo/echo",
        messages: [{ role: "user", content: "stream router" }],
        maxTokens: 50,
        stream: true,
      },
    });
    let text = "";
    for await (const chunk of s as AsyncIterable<{ choices: { delta: { content?: string } }[] }>) {
      text += chunk.choices[0]?.delta.content ?? "";
    }
    assert.equal(text, "Echo: stream router");
  });
});

Deno.test("usage: {include: true} is honoured by the gateway and not forwarded", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const openai = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    // OpenRouter's usage accounting, not in the openai SDK's types: sent as an extra body member.
    const params = {
      model: "demo/echo",
      messages: [{ role: "user" as const, content: "count me" }],
      stream: true as const,
      usage: { include: true },
    };
    const stream = await openai.chat.completions.create(params);
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const c of stream) if (c.usage) usage = c.usage;
    assert.ok(usage && usage.prompt_tokens > 0 && usage.completion_tokens > 0, "usage chunk sent");
    const up = sent("/v1/chat/completions").at(-1)!;
    assert.ok(!("usage" in up), "usage.include stays at the gateway");

    const bad = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "demo/echo",
        messages: [{ role: "user", content: "x" }],
        usage: { include: "yes" },
      }),
    });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.param, "usage.include");
  });
});

Deno.test("reasoning_effort none and xhigh on chat", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const openai = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const hi = await openai.chat.completions.create({
      model: "demo/echo-next",
      messages: [{ role: "user", content: "think hard" }],
      reasoning_effort: "xhigh",
    });
    assert.match(hi.choices[0].message.content ?? "", /Echo: think hard/);
    assert.equal(sent("/v1/chat/completions").at(-1)!.reasoning_effort, "xhigh");
    // "none" on a model without reasoning asks for what it does anyway: met, not forwarded.
    const none = await openai.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "no thinking" }],
      reasoning_effort: "none",
    });
    assert.match(none.choices[0].message.content ?? "", /Echo: no thinking/);
    assert.ok(!("reasoning_effort" in sent("/v1/chat/completions").at(-1)!));
  });
});

Deno.test("stream_options.include_obfuscation: chunks padded to the bucket, never forwarded", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "demo/echo",
        messages: [{ role: "user", content: "a b c d e f" }],
        stream: true,
        stream_options: { include_usage: true, include_obfuscation: true },
      }),
    });
    assert.equal(res.status, 200);
    const frames = (await res.text()).split("\n\n").filter((f) => f !== "");
    const chunks = frames.filter((f) => f !== "data: [DONE]");
    assert.ok(chunks.length > 3);
    for (const f of chunks) {
      assert.equal(new TextEncoder().encode(f + "\n\n").byteLength % OBFUSCATION_BUCKET, 0, f);
      assert.equal(typeof JSON.parse(f.slice(6)).obfuscation, "string");
    }
    const up = sent("/v1/chat/completions").at(-1)!;
    assert.deepEqual(up.stream_options, { include_usage: true });

    // The official SDK parses the padded stream as usual.
    const openai = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const s = await openai.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "padded" }],
      stream: true,
      stream_options: { include_obfuscation: true },
    });
    let text = "";
    for await (const c of s) text += c.choices[0]?.delta.content ?? "";
    assert.equal(text, "Echo: padded");
  });
});
