import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";

Deno.test("chat: non-streamed and streamed through the openai SDK", async () => {
  const gw = await startTestGateway();
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
});
