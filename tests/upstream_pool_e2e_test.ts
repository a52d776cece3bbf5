/**
 * The gateway's HTTP/1.1 upstream client keeps connections alive: sequential
 * non-streamed calls and streams that end with `[DONE]` go over one upstream
 * connection (a stream's last bytes are read, not cancelled), so a request
 * does not pay a new TCP (or TLS) handshake.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";

const enc = new TextEncoder();
const chunk = (delta: Record<string, string>, finish: string | null) =>
  `data: ${
    JSON.stringify({
      id: "chatcmpl-pool",
      object: "chat.completion.chunk",
      created: 1,
      model: "m",
      choices: [{ index: 0, delta, finish_reason: finish }],
    })
  }\n\n`;

Deno.test("sequential calls and finished streams reuse one upstream connection", async () => {
  const ports = new Set<number>();
  const upstream = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req, info) => {
      // The gateway's start-up model listing check (GET /v1/models) is not inference traffic.
      if (req.method !== "POST") return new Response("no listing", { status: 404 });
      ports.add(info.remoteAddr.port);
      const body = await req.json() as { stream?: boolean };
      if (!body.stream) {
        return Response.json({
          id: "chatcmpl-pool",
          object: "chat.completion",
          created: 1,
          model: "m",
          choices: [{
            index: 0,
            message: { role: "assistant", content: "hi" },
            finish_reason: "stop",
          }],
          usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
        });
      }
      // `[DONE]` first, the end of the body a little later (as real upstreams often do):
      // cancelling at `[DONE]` would throw the connection away.
      return new Response(
        new ReadableStream<Uint8Array>({
          async start(c) {
            c.enqueue(enc.encode(chunk({ role: "assistant", content: "hi" }, null)));
            c.enqueue(enc.encode(chunk({}, "stop") + "data: [DONE]\n\n"));
            await new Promise((r) => setTimeout(r, 10));
            c.close();
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      );
    },
  );
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.find((p) => p.name === "plain")!.base_url =
        `http://127.0.0.1:${upstream.addr.port}`;
    },
  });
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey });
    for (let i = 0; i < 3; i++) {
      const res = await client.chat.completions.create({
        model: "demo/vision", // routed to the plain provider only
        messages: [{ role: "user", content: "hello" }],
      });
      assert.equal(res.choices[0].message.content, "hi");
      const stream = await client.chat.completions.create({
        model: "demo/vision",
        messages: [{ role: "user", content: "hello" }],
        stream: true,
      });
      let text = "";
      for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
      assert.equal(text, "hi");
      // The stream's tail (10 ms behind `[DONE]`) is drained in the background.
      await new Promise((r) => setTimeout(r, 40));
    }
    assert.equal(ports.size, 1, `upstream connections used: ${ports.size}`);
  } finally {
    await gw.close();
    await upstream.shutdown();
  }
});
