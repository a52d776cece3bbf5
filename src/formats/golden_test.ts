/**
 * Golden tests: one per translation bug other gateways shipped (formats.md,
 * "Bugs other gateways shipped"), each feeding the upstream chunk sequence that
 * triggered it and asserting the exact events written to the client.
 */

import assert from "node:assert/strict";
import { createMessagesStreamTranslator } from "./messages/stream.ts";
import { createResponsesStreamTranslator } from "./responses/stream.ts";
import { parseMessagesRequest } from "./messages/request.ts";
import { parseResponsesRequest } from "./responses/request.ts";
import { messageIdFor } from "./messages/ids.ts";
import { decodeEvents, delta, types, usageChunk } from "./messages/testing.ts";
import { SseDecoder } from "./sse.ts";
import type { ChatChunk } from "./chat/types.ts";
import { GatewayError } from "../http/errors.ts";

const MSG_ID = messageIdFor("chatcmpl-test");

Deno.test("golden: usage chunk after the finish chunk still lands in message_delta (exact SSE)", () => {
  const t = createMessagesStreamTranslator({ model: "claude-ish", inputTokensEstimate: 9 });
  let sse = t.chunk(delta({ role: "assistant", content: "Hi" }));
  sse += t.chunk(delta({}, "stop"));
  sse += t.chunk(usageChunk(10, 2));
  sse += t.end();
  assert.equal(
    sse,
    `event: message_start\ndata: {"type":"message_start","message":{"id":"${MSG_ID}","type":"message","role":"assistant","content":[],"model":"claude-ish","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":0,"cache_creation_input_tokens":null,"cache_read_input_tokens":null}}}\n\n` +
      `event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n` +
      `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n` +
      `event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n` +
      `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":9,"output_tokens":2}}\n\n` +
      `event: message_stop\ndata: {"type":"message_stop"}\n\n`,
  );
  assert.deepEqual(t.usage(), { prompt_tokens: 10, completion_tokens: 2 });
});

Deno.test("golden: usage chunk after the finish chunk still lands in response.completed", () => {
  const t = createResponsesStreamTranslator({ model: "m", createdAt: 1700000000, id: "resp_g" });
  let sse = t.chunk(delta({ content: "Hi" }));
  sse += t.chunk(delta({}, "stop"));
  assert.ok(!sse.includes("response.completed"), "completed must wait for the usage chunk");
  sse += t.chunk(usageChunk(10, 2));
  sse += t.end();
  const last = decodeEvents(sse).at(-1)!;
  assert.equal(last.data.type, "response.completed");
  const usage = (last.data.response as { usage: unknown }).usage;
  assert.deepEqual(usage, {
    input_tokens: 10,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 2,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 12,
  });
});

Deno.test("golden: message_start carries the input estimate, never 0/0", () => {
  const t = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 1234 });
  const [start] = decodeEvents(t.chunk(delta({ role: "assistant", content: "" })));
  assert.equal(start!.data.type, "message_start");
  const usage =
    (start!.data.message as { usage: { input_tokens: number; output_tokens: number } }).usage;
  assert.equal(usage.input_tokens, 1234);
  assert.equal(usage.output_tokens, 0);
});

Deno.test("golden: `tool_calls: []` yields no tool block and no input_json_delta", () => {
  const chunks: ChatChunk[] = [
    delta({ role: "assistant", content: "", tool_calls: [] }),
    delta({ content: "plain answer", tool_calls: [] }),
    delta({ tool_calls: [] }, "stop"),
    usageChunk(5, 3),
  ];
  const m = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 5 });
  const msse = chunks.map((c) => m.chunk(c)).join("") + m.end();
  assert.ok(!msse.includes("tool_use") && !msse.includes("input_json_delta"));
  assert.deepEqual(types(decodeEvents(msse)), [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
  assert.deepEqual(decodeEvents(msse)[4]!.data.delta, {
    stop_reason: "end_turn",
    stop_sequence: null,
  });
  const r = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  const rsse = chunks.map((c) => r.chunk(c)).join("") + r.end();
  assert.ok(!rsse.includes("function_call"));
  assert.deepEqual(types(decodeEvents(rsse)), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
  ]);
});

Deno.test("golden: sequence_number strictly increasing and response.incomplete on length", () => {
  const t = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  const sse = t.chunk(delta({ content: "cut he" })) + t.chunk(delta({ content: "re" }, "length")) +
    t.chunk(usageChunk(3, 2)) + t.end();
  const evs = decodeEvents(sse);
  evs.forEach((e, i) => assert.equal(e.data.sequence_number, i));
  assert.ok(!sse.includes("[DONE]"));
  assert.deepEqual(types(evs), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.incomplete",
  ]);
  const resp = evs.at(-1)!.data.response as Record<string, unknown>;
  assert.equal(resp.status, "incomplete");
  assert.deepEqual(resp.incomplete_details, { reason: "max_output_tokens" });
  assert.equal((resp.output as Array<{ status: string }>)[0]!.status, "incomplete");
  assert.equal((evs[8]!.data.item as { status: string }).status, "incomplete");
});

Deno.test("golden: upstream failing mid-stream → response.failed in-band, never a clean completion", () => {
  const t = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  let sse = t.chunk(delta({ content: "partial" }));
  sse += t.fail(new GatewayError("upstream_error", "upstream connection reset"));
  assert.equal(t.end(), "", "end() after fail() must not complete the response");
  const evs = decodeEvents(sse);
  evs.forEach((e, i) => assert.equal(e.data.sequence_number, i));
  assert.deepEqual(types(evs), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.failed",
  ]);
  const resp = evs.at(-1)!.data.response as Record<string, unknown>;
  assert.equal(resp.status, "failed");
  assert.deepEqual(resp.error, { code: "server_error", message: "upstream connection reset" });
  assert.deepEqual(resp.output, [{
    type: "message",
    id: (evs[2]!.data.item as { id: string }).id,
    status: "incomplete",
    role: "assistant",
    content: [{ type: "output_text", text: "partial", annotations: [], logprobs: [] }],
  }]);
  // Failure before any upstream byte still yields a valid lifecycle (created first).
  const early = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  assert.deepEqual(
    types(decodeEvents(early.fail(new GatewayError("upstream_timeout", "upstream timed out")))),
    [
      "response.created",
      "response.in_progress",
      "response.failed",
    ],
  );
});

Deno.test("golden: upstream failing mid-stream → Anthropic `event: error`, no message_stop", () => {
  const t = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 2 });
  let sse = t.chunk(delta({ content: "partial" }));
  sse += t.fail(new GatewayError("unavailable", "upstream unavailable"));
  assert.equal(t.end(), "");
  assert.ok(sse.endsWith(
    'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"upstream unavailable"}}\n\n',
  ));
  assert.ok(!sse.includes("message_stop") && !sse.includes("message_delta"));
});

Deno.test("golden: upstream `: PROCESSING` comments are tolerated and never forwarded", () => {
  const upstream = ": PROCESSING\n\n" +
    'data: {"id":"chatcmpl-test","object":"chat.completion.chunk","created":1,"model":"u","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}\n\n' +
    ": PROCESSING\n\n" +
    'data: {"id":"chatcmpl-test","object":"chat.completion.chunk","created":1,"model":"u","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n' +
    ": PROCESSING\n\n" +
    'data: {"id":"chatcmpl-test","object":"chat.completion.chunk","created":1,"model":"u","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}\n\n' +
    "data: [DONE]\n\n";
  const m = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 4 });
  const r = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  const dec = new SseDecoder();
  let out = "";
  const bytes = new TextEncoder().encode(upstream);
  for (let i = 0; i < bytes.length; i += 5) {
    for (const ev of dec.push(bytes.subarray(i, i + 5))) {
      if (ev.data === "[DONE]") continue;
      const c = JSON.parse(ev.data) as ChatChunk;
      out += m.chunk(c) + r.chunk(c);
    }
  }
  out += m.end() + r.end();
  assert.ok(!out.includes("PROCESSING"));
  assert.ok(!/^:/m.test(out), "no SSE comment line may reach the client");
  assert.deepEqual(m.usage(), { prompt_tokens: 4, completion_tokens: 1 });
  assert.deepEqual(r.usage(), { prompt_tokens: 4, completion_tokens: 1 });
});

Deno.test("golden: usage is still reported when the stream is cut (client disconnect / upstream cut)", () => {
  // Upstream usage seen before the cut: exact numbers.
  const a = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 7 });
  a.chunk(delta({ content: "x" }, "stop"));
  a.chunk(usageChunk(8, 1));
  assert.deepEqual(a.usage(), { prompt_tokens: 8, completion_tokens: 1 });
  // No usage chunk before the cut: the gateway's prompt count and one token per content delta.
  const b = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 7 });
  b.chunk(delta({ content: "a" }));
  b.chunk(delta({ reasoning_content: "r" }));
  b.chunk(delta({ tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: "{}" } }] }));
  assert.deepEqual(b.usage(), { prompt_tokens: 7, completion_tokens: 3 });
  b.fail(new GatewayError("upstream_error", "cut"));
  assert.deepEqual(b.usage(), { prompt_tokens: 7, completion_tokens: 3 });
  const c = createResponsesStreamTranslator({ model: "m", createdAt: 1, inputTokensEstimate: 6 });
  c.chunk(delta({ content: "a" }));
  c.chunk(delta({ content: "b" }));
  assert.deepEqual(c.usage(), { prompt_tokens: 6, completion_tokens: 2 });
  const failed = decodeEvents(c.fail(new GatewayError("upstream_error", "cut"))).at(-1)!;
  assert.equal(
    (failed.data.response as { usage: { output_tokens: number } }).usage.output_tokens,
    2,
  );
});

Deno.test("golden: no error message ever contains prompt text", () => {
  const SECRET = "SECRET-PROMPT-7f3a";
  const messagesBodies: unknown[] = [
    {
      model: "m",
      max_tokens: 1,
      messages: [{ role: "user", content: [{ type: "weird", text: SECRET }] }],
    },
    { model: "m", max_tokens: 1, messages: [{ role: SECRET, content: SECRET }] },
    { model: "m", max_tokens: SECRET, messages: [{ role: "user", content: SECRET }] },
    {
      model: "m",
      max_tokens: 1,
      messages: [{ role: "user", content: SECRET }],
      tools: [{ type: SECRET, name: SECRET }],
    },
    {
      model: "m",
      max_tokens: 1,
      messages: [{
        role: "user",
        content: [{ type: "image", source: { type: "url", url: SECRET } }],
      }],
    },
    {
      model: "m",
      max_tokens: 1,
      messages: [{
        role: "user",
        content: [{ type: "image", source: { type: "base64", media_type: SECRET, data: SECRET } }],
      }],
    },
    {
      model: "m",
      max_tokens: 1,
      messages: [{ role: "user", content: SECRET }],
      tool_choice: { type: SECRET },
    },
  ];
  const responsesBodies: unknown[] = [
    { model: "m", input: [{ type: SECRET, content: SECRET }] },
    { model: "m", input: [{ role: SECRET, content: SECRET }] },
    { model: "m", input: [{ role: "user", content: [{ type: SECRET, text: SECRET }] }] },
    { model: "m", input: SECRET, tools: [{ type: SECRET }] },
    { model: "m", input: SECRET, previous_response_id: SECRET },
    { model: "m", input: SECRET, text: { format: { type: SECRET } } },
    { model: "m", input: SECRET, tool_choice: SECRET },
    { model: "m", input: [SECRET] },
    { model: "m", input: SECRET, metadata: { [SECRET]: 1 } },
  ];
  const check = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      assert.ok(e instanceof GatewayError);
      assert.ok(!e.message.includes(SECRET), e.message);
      assert.ok(!(e.param ?? "").includes(SECRET), String(e.param));
      return;
    }
    assert.fail("expected a validation error");
  };
  for (const b of messagesBodies) check(() => parseMessagesRequest(b));
  for (const b of responsesBodies) check(() => parseResponsesRequest(b));
});
