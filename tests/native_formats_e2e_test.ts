/**
 * Upstreams that natively serve a client format get it forwarded untranslated
 * (only the model name rewritten): a tiny native Anthropic/Responses upstream.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";

function sse(events: [string, unknown][]): Response {
  const body = events.map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`).join("");
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
}

function startNativeUpstream() {
  const seen: { path: string; body: Record<string, unknown> }[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const path = new URL(req.url).pathname;
    const body = await req.json();
    seen.push({ path, body });
    const usage = { input_tokens: 7, output_tokens: 3 };
    if (path === "/v1/messages") {
      const message = {
        id: "msg_native",
        type: "message",
        role: "assistant",
        model: body.model,
        content: [{ type: "text", text: "native hello" }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage,
      };
      if (!body.stream) return Response.json(message);
      return sse([
        ["message_start", {
          type: "message_start",
          message: {
            ...message,
            content: [],
            stop_reason: null,
            usage: { input_tokens: 7, output_tokens: 0 },
          },
        }],
        ["content_block_start", {
          type: "content_block_start",
          index: 0,
          content_block: { type: "text", text: "" },
        }],
        ["content_block_delta", {
          type: "content_block_delta",
          index: 0,
          delta: { type: "text_delta", text: "native hello" },
        }],
        ["content_block_stop", { type: "content_block_stop", index: 0 }],
        ["message_delta", {
          type: "message_delta",
          delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { output_tokens: 3 },
        }],
        ["message_stop", { type: "message_stop" }],
      ]);
    }
    if (path === "/v1/responses") {
      return Response.json({
        id: "resp_native",
        object: "response",
        created_at: 1,
        status: "completed",
        model: body.model,
        output: [{
          type: "message",
          id: "msg_1",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: "native response", annotations: [] }],
        }],
        usage: { input_tokens: 5, output_tokens: 2, total_tokens: 7 },
      });
    }
    return new Response("not found", { status: 404 });
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, seen, close: () => server.shutdown() };
}

Deno.test("native messages/responses upstreams are forwarded untranslated", async () => {
  const native = startNativeUpstream();
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.push({
        name: "native",
        base_url: native.url,
        zdr: false,
        priority: 100,
        timeout_ms: 5000,
        native_formats: ["messages", "responses"],
      });
      c.models.push({
        ...c.models[0],
        id: "native/model",
        aliases: [],
        routes: [{ provider: "native", model: "upstream-name" }],
      });
    },
  });
  try {
    const anthropic = new Anthropic({ baseURL: gw.url, apiKey: gw.apiKey, maxRetries: 0 });
    const msg = await anthropic.messages.create({
      model: "native/model",
      max_tokens: 20,
      messages: [{ role: "user", content: "hi" }],
      // @ts-expect-error the gateway's routing block
      provider: { zdr: false },
    });
    assert.equal(msg.model, "native/model", "model rewritten to the client's id");
    assert.equal(msg.id, "msg_native", "everything else untranslated");
    assert.equal(native.seen[0].path, "/v1/messages");
    assert.equal(native.seen[0].body.model, "upstream-name");
    assert.equal(native.seen[0].body.provider, undefined, "routing block stripped");
    assert.equal(native.seen[0].body.max_tokens, 20);

    const final = await anthropic.messages.stream({
      model: "native/model",
      max_tokens: 20,
      messages: [{ role: "user", content: "hi" }],
    }).finalMessage();
    assert.match(JSON.stringify(final.content), /native hello/);
    assert.equal(final.usage.output_tokens, 3);

    const openai = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const r = await openai.responses.create({ model: "native/model", input: "hi" });
    assert.equal(r.output_text, "native response");
    assert.equal(native.seen.at(-1)!.path, "/v1/responses");
  } finally {
    await gw.close();
    await native.close();
  }
});
