/**
 * The translators' output read back by the official SDKs' own stream parsers
 * and accumulators, over an in-memory `fetch` (no network): a shape the SDKs
 * reject is a bug even if our own decoder accepts it.
 */

import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { createMessagesStreamTranslator } from "./messages/stream.ts";
import { chatToMessagesResponse } from "./messages/response.ts";
import { createResponsesStreamTranslator } from "./responses/stream.ts";
import { chatToResponsesResponse } from "./responses/response.ts";
import { parseResponsesRequest } from "./responses/request.ts";
import { delta, usageChunk } from "./messages/testing.ts";
import type { ChatChunk, ChatResponse } from "./chat/types.ts";
import type { StreamTranslator } from "./stream_translator.ts";
import { GatewayError } from "../http/errors.ts";

function fakeFetch(body: string, contentType: string): typeof fetch {
  return (_input: RequestInfo | URL, _init?: RequestInit) =>
    Promise.resolve(new Response(body, { status: 200, headers: { "content-type": contentType } }));
}

function run(t: StreamTranslator, chunks: ChatChunk[], failWith?: GatewayError): string {
  let out = t.keepAlive();
  for (const c of chunks) out += t.chunk(c) + t.keepAlive();
  return out + (failWith ? t.fail(failWith) : t.end());
}

const toolStream: ChatChunk[] = [
  delta({ role: "assistant", content: "" }),
  delta({ reasoning_content: "need data" }),
  delta({ content: "Checking" }),
  delta({
    tool_calls: [{
      index: 0,
      id: "call_1",
      type: "function",
      function: { name: "weather", arguments: "" },
    }],
  }),
  delta({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
  delta({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
  delta({}, "tool_calls"),
  usageChunk(21, 6),
];

const anthropic = (body: string, type = "text/event-stream") =>
  new Anthropic({
    apiKey: "test",
    baseURL: "http://127.0.0.1:9",
    fetch: fakeFetch(body, type),
    maxRetries: 0,
  });
const openai = (body: string, type = "text/event-stream") =>
  new OpenAI({
    apiKey: "test",
    baseURL: "http://127.0.0.1:9/v1",
    fetch: fakeFetch(body, type),
    maxRetries: 0,
  });

Deno.test("Anthropic SDK accumulates our stream: thinking, text, tool input, one input count", async () => {
  const t = createMessagesStreamTranslator({ model: "client-m", inputTokensEstimate: 20 });
  const client = anthropic(run(t, toolStream));
  const stream = client.messages.stream({
    model: "client-m",
    max_tokens: 50,
    messages: [{ role: "user", content: "q" }],
  });
  const msg = await stream.finalMessage();
  assert.equal(msg.model, "client-m");
  assert.equal(msg.stop_reason, "tool_use");
  assert.deepEqual(
    msg.usage.input_tokens,
    20,
    "message_start and message_delta report the same (gateway-counted) input tokens",
  );
  assert.deepEqual(t.usage()?.prompt_tokens, 21, "billing uses the upstream's count");
  assert.equal(msg.usage.output_tokens, 6);
  assert.deepEqual(msg.content.map((b) => b.type), ["thinking", "text", "tool_use"]);
  const [thinking, text, tool] = msg.content;
  assert.ok(thinking?.type === "thinking" && text?.type === "text" && tool?.type === "tool_use");
  assert.equal(thinking.thinking, "need data");
  assert.equal(text.text, "Checking");
  assert.equal(tool.id, "call_1");
  assert.equal(tool.name, "weather");
  assert.deepEqual(tool.input, { city: "Oslo" });
});

Deno.test("Anthropic SDK surfaces our in-band error event as an error", async () => {
  const t = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 3 });
  const sse = run(
    t,
    [delta({ content: "partial" })],
    new GatewayError("upstream_error", "upstream failed"),
  );
  const stream = anthropic(sse).messages.stream({
    model: "m",
    max_tokens: 5,
    messages: [{ role: "user", content: "q" }],
  });
  await assert.rejects(
    stream.finalMessage(),
    (e: unknown) => e instanceof Error && e.message.includes("upstream failed"),
  );
});

Deno.test("Anthropic SDK reads our non-streaming message", async () => {
  const chat: ChatResponse = {
    id: "chatcmpl-1",
    object: "chat.completion",
    created: 1,
    model: "u",
    choices: [{
      index: 0,
      message: { role: "assistant", content: "hello" },
      finish_reason: "stop",
    }],
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  };
  const client = anthropic(JSON.stringify(chatToMessagesResponse(chat, "m")), "application/json");
  const msg = await client.messages.create({
    model: "m",
    max_tokens: 5,
    messages: [{ role: "user", content: "q" }],
  });
  assert.equal(msg.content[0]?.type === "text" ? msg.content[0].text : undefined, "hello");
  assert.equal(msg.stop_reason, "end_turn");
});

Deno.test("OpenAI SDK accumulates our Responses stream: output_text, function call, usage", async () => {
  const { echo } = parseResponsesRequest({ model: "client-m", input: "q", instructions: "sys" });
  const t = createResponsesStreamTranslator({ model: "client-m", createdAt: 1700000000, echo });
  const client = openai(run(t, toolStream));
  const stream = client.responses.stream({ model: "client-m", input: "q" });
  const seen: number[] = [];
  stream.on("event", (e) => seen.push(e.sequence_number));
  const resp = await stream.finalResponse();
  assert.deepEqual(seen, seen.map((_, i) => i));
  assert.equal(resp.status, "completed");
  assert.equal(resp.output_text, "Checking");
  assert.equal(resp.instructions, "sys");
  assert.deepEqual(resp.output.map((o) => o.type), ["reasoning", "message", "function_call"]);
  const fc = resp.output[2];
  assert.ok(fc?.type === "function_call");
  assert.equal(fc.call_id, "call_1");
  assert.equal(fc.arguments, '{"city":"Oslo"}');
  const rs = resp.output[0];
  assert.ok(rs?.type === "reasoning");
  assert.deepEqual(rs.content, [{ type: "reasoning_text", text: "need data" }]);
  assert.equal(resp.usage?.input_tokens, 21);
  assert.equal(resp.usage?.total_tokens, 27);
});

Deno.test("OpenAI SDK sees response.incomplete and response.failed from our stream", async () => {
  const inc = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  const incSse = run(inc, [delta({ content: "trunc" }, "length"), usageChunk(2, 1)]);
  const types: string[] = [];
  for await (
    const e of await openai(incSse).responses.create({ model: "m", input: "q", stream: true })
  ) {
    types.push(e.type);
    if (e.type === "response.incomplete") {
      assert.equal(e.response.status, "incomplete");
      assert.equal(e.response.incomplete_details?.reason, "max_output_tokens");
    }
  }
  assert.equal(types.at(-1), "response.incomplete");

  const failing = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  const failSse = run(
    failing,
    [delta({ content: "par" })],
    new GatewayError("upstream_error", "upstream failed"),
  );
  const failTypes: string[] = [];
  for await (
    const e of await openai(failSse).responses.create({ model: "m", input: "q", stream: true })
  ) {
    failTypes.push(e.type);
    if (e.type === "response.failed") assert.equal(e.response.error?.message, "upstream failed");
  }
  assert.equal(failTypes.at(-1), "response.failed");
  assert.ok(!failTypes.includes("response.completed"));

  // The SDK's stricter ResponseStream accumulator accepts both terminal shapes too.
  const incFinal = await openai(incSse).responses.stream({ model: "m", input: "q" })
    .finalResponse();
  assert.equal(incFinal.status, "incomplete");
  assert.equal(incFinal.output_text, "trunc");
  const failFinal = await openai(failSse).responses.stream({ model: "m", input: "q" })
    .finalResponse();
  assert.equal(failFinal.status, "failed");
  const cut = failFinal.output[0];
  assert.ok(cut?.type === "message");
  assert.equal(cut.status, "incomplete");
});

Deno.test("OpenAI SDK reads our non-streaming Responses object (output_text computed client-side)", async () => {
  const chat: ChatResponse = {
    id: "chatcmpl-2",
    object: "chat.completion",
    created: 1,
    model: "u",
    choices: [{
      index: 0,
      message: { role: "assistant", content: "hi there" },
      finish_reason: "stop",
    }],
    usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
  };
  const body = JSON.stringify(chatToResponsesResponse(chat, "m", { createdAt: 1700000000 }));
  const resp = await openai(body, "application/json").responses.create({ model: "m", input: "q" });
  assert.equal(resp.output_text, "hi there");
  assert.equal(resp.status, "completed");
  assert.equal(resp.usage?.output_tokens, 2);
});
