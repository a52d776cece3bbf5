import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";

for (const client of ["http1", "fetch"] as const) {
  Deno.test(`chat: non-streamed and streamed through the openai SDK (upstream client ${client})`, async () => {
    await chatRoundTrip(client);
  });
}

async function chatRoundTrip(upstreamClient: "http1" | "fetch"): Promise<void> {
  const gw = await startTestGateway({ configure: (c) => (c.upstream.client = upstreamClient) });
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey });
    const res = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "hello there" }],
    });
    assert.equal(res.object, "chat.completion");
    assert.equal(res.model, "demo/echo");
    assert.match(res.choices[0].message.content ?? "", /hello there/);
    assert.ok(res.usage && res.usage.total_tokens > 0);

    const stream = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "stream me please" }],
      stream: true,
    });
    let text = "";
    let chunks = 0;
    for await (const c of stream) {
      chunks++;
      text += c.choices[0]?.delta?.content ?? "";
    }
    assert.ok(chunks > 2);
    assert.match(text, /stream me please/);
  } finally {
    await gw.close();
  }
}

Deno.test("usage chunk only when asked for; billed either way, and on client disconnect", async () => {
  const { getUsage } = await import("../src/admission/credits.ts");
  const { authenticate } = await import("../src/keys/keys.ts");
  const gw = await startTestGateway();
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const keyId = (await authenticate(gw.kv, `Bearer ${gw.apiKey}`)).key_id;
    const collect = async (includeUsage: boolean) => {
      const stream = await client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "count my tokens please" }],
        stream: true,
        ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
      });
      const chunks = [];
      for await (const c of stream) chunks.push(c);
      return chunks;
    };
    const withUsage = await collect(true);
    const last = withUsage.at(-1)!;
    assert.deepEqual(last.choices, []);
    assert.ok(last.usage && last.usage.completion_tokens > 0);
    const without = await collect(false);
    assert.ok(without.every((c) => !c.usage), "no usage chunk unless the client asked");
    const u = await getUsage(gw.kv, keyId);
    assert.equal(u.requests, 2n, "both streams were billed");
    assert.equal(u.completion_tokens, BigInt(2 * last.usage!.completion_tokens));

    // A client that hangs up mid-stream is still billed (prompt + the chunks it got), once.
    gw.plain.setFault({ kind: "token_delay", ms: 200 });
    gw.secure.setFault({ kind: "token_delay", ms: 200 });
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
      body: JSON.stringify({
        model: "demo/echo",
        stream: true,
        messages: [{ role: "user", content: "a b c d e f g h i j k l" }],
      }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    let after = await getUsage(gw.kv, keyId);
    for (let i = 0; i < 50 && after.requests < 3n; i++) {
      await new Promise((r) => setTimeout(r, 20));
      after = await getUsage(gw.kv, keyId);
    }
    assert.equal(after.requests, 3n);
    assert.ok(after.prompt_tokens > u.prompt_tokens);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await getUsage(gw.kv, keyId)).requests, 3n, "no double debit");
  } finally {
    await gw.close();
  }
});
