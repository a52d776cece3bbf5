import assert from "node:assert/strict";
import { createMessagesStreamTranslator } from "./stream.ts";
import { decodeEvents, delta, types, usageChunk } from "./testing.ts";
import { GatewayError } from "../../http/errors.ts";

Deno.test("messages stream: thinking → text → two tool calls, exact events, SSE event name = type", () => {
  const t = createMessagesStreamTranslator({ model: "client-m", inputTokensEstimate: 12 });
  let sse = "";
  sse += t.chunk(delta({ role: "assistant", content: "" }));
  sse += t.chunk(delta({ reasoning_content: "think" }));
  sse += t.chunk(delta({ content: "Hi" }));
  sse += t.chunk(delta({ content: " there" }));
  sse += t.chunk(
    delta({
      tool_calls: [{
        index: 0,
        id: "call_a",
        type: "function",
        function: { name: "get", arguments: "" },
      }],
    }),
  );
  sse += t.chunk(delta({ tool_calls: [{ index: 0, function: { arguments: '{"q":' } }] }));
  sse += t.chunk(delta({ tool_calls: [{ index: 0, function: { arguments: "1}" } }] }));
  sse += t.chunk(
    delta({ tool_calls: [{ index: 1, id: "call_b", function: { name: "put", arguments: "{}" } }] }),
  );
  sse += t.chunk(delta({}, "tool_calls"));
  sse += t.chunk(usageChunk(15, 9));
  sse += t.end();
  assert.equal(t.end(), "");
  const evs = decodeEvents(sse);
  for (const e of evs) assert.equal(e.event, e.data.type);
  assert.deepEqual(types(evs), [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_delta",
    "content_block_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_delta",
    "content_block_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
  const start = evs[0]!.data.message as Record<string, unknown>;
  assert.match(String(start.id), /^msg_/);
  assert.equal(start.model, "client-m");
  assert.deepEqual(start.content, []);
  assert.deepEqual(start.usage, {
    input_tokens: 12,
    output_tokens: 0,
    cache_creation_input_tokens: null,
    cache_read_input_tokens: null,
  });
  assert.deepEqual(evs.slice(1, 4).map((e) => e.data), [
    {
      type: "content_block_start",
      index: 0,
      content_block: { type: "thinking", thinking: "", signature: "" },
    },
    { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "think" } },
    { type: "content_block_stop", index: 0 },
  ]);
  assert.deepEqual(evs[4]!.data, {
    type: "content_block_start",
    index: 1,
    content_block: { type: "text", text: "" },
  });
  assert.deepEqual(evs[6]!.data, {
    type: "content_block_delta",
    index: 1,
    delta: { type: "text_delta", text: " there" },
  });
  assert.deepEqual(evs[8]!.data, {
    type: "content_block_start",
    index: 2,
    content_block: { type: "tool_use", id: "call_a", name: "get", input: {} },
  });
  assert.deepEqual(evs.slice(9, 11).map((e) => e.data.delta), [
    { type: "input_json_delta", partial_json: '{"q":' },
    { type: "input_json_delta", partial_json: "1}" },
  ]);
  assert.deepEqual(evs[12]!.data.content_block, {
    type: "tool_use",
    id: "call_b",
    name: "put",
    input: {},
  });
  assert.deepEqual(evs[13]!.data, {
    type: "content_block_delta",
    index: 3,
    delta: { type: "input_json_delta", partial_json: "{}" },
  });
  assert.deepEqual(evs[15]!.data, {
    type: "message_delta",
    delta: { stop_reason: "tool_use", stop_sequence: null },
    usage: { input_tokens: 12, output_tokens: 9 },
  });
  // message_delta repeats message_start's count; billing takes the upstream's.
  assert.deepEqual(t.usage(), { prompt_tokens: 15, completion_tokens: 9 });
});

Deno.test("messages stream: tool name arriving after its first argument fragment; missing id is generated", () => {
  const t = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 1 });
  let sse = t.chunk(delta({ tool_calls: [{ index: 0, function: { arguments: '{"a"' } }] }));
  sse += t.chunk(delta({ tool_calls: [{ index: 0, function: { name: "f", arguments: ":1}" } }] }));
  sse += t.end();
  const evs = decodeEvents(sse);
  assert.deepEqual(types(evs), [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
  const block = evs[1]!.data.content_block as Record<string, unknown>;
  assert.equal(block.name, "f");
  assert.match(String(block.id), /^toolu_/);
  // Fragments buffered before the name are flushed as one delta once the block opens.
  assert.deepEqual(evs[2]!.data.delta, { type: "input_json_delta", partial_json: '{"a":1}' });
  // Clean end without a finish reason but with a tool call is still tool_use.
  assert.deepEqual((evs[4]!.data.delta as Record<string, unknown>).stop_reason, "tool_use");
});

Deno.test("messages stream: interleaved tool argument fragments are an upstream_error", () => {
  const t = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 1 });
  t.chunk(delta({ tool_calls: [{ index: 0, id: "a", function: { name: "f", arguments: "{" } }] }));
  t.chunk(delta({ tool_calls: [{ index: 1, id: "b", function: { name: "g", arguments: "{" } }] }));
  assert.throws(
    () => t.chunk(delta({ tool_calls: [{ index: 0, function: { arguments: "}" } }] })),
    (e: unknown) => e instanceof GatewayError && e.kind === "upstream_error",
  );
  const tail = decodeEvents(
    t.fail(new GatewayError("upstream_error", "upstream interleaved tool call arguments")),
  );
  assert.deepEqual(types(tail), ["error"]);
});

Deno.test("messages stream: stop sequence reported from the upstream's matched stop string", () => {
  const t = createMessagesStreamTranslator({
    model: "m",
    inputTokensEstimate: 3,
    stopSequences: ["###"],
  });
  let sse = t.chunk(delta({ content: "a" }));
  sse += t.chunk(delta({}, "stop", { stop_reason: "###" }));
  sse += t.end();
  const md = decodeEvents(sse).find((e) => e.data.type === "message_delta")!;
  assert.deepEqual(md.data.delta, { stop_reason: "stop_sequence", stop_sequence: "###" });
  const t2 = createMessagesStreamTranslator({
    model: "m",
    inputTokensEstimate: 3,
    stopSequences: ["###"],
  });
  const md2 = decodeEvents(t2.chunk(delta({ content: "a" }, "length")) + t2.end()).find((e) =>
    e.data.type === "message_delta"
  )!;
  assert.deepEqual(md2.data.delta, { stop_reason: "max_tokens", stop_sequence: null });
});

Deno.test("messages stream: empty upstream still yields a well-formed message with one empty text block", () => {
  const t = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 4 });
  const evs = decodeEvents(t.end());
  assert.deepEqual(types(evs), [
    "message_start",
    "content_block_start",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
  assert.deepEqual(evs[3]!.data.usage, { input_tokens: 4, output_tokens: 0 });
  assert.equal(t.usage(), undefined);
});

Deno.test("messages stream: keepAlive is a ping event; nothing is written after the end", () => {
  const t = createMessagesStreamTranslator({ model: "m", inputTokensEstimate: 1 });
  assert.equal(t.keepAlive(), 'event: ping\ndata: {"type":"ping"}\n\n');
  t.end();
  assert.equal(t.keepAlive(), "");
  assert.equal(t.chunk(delta({ content: "late" })), "");
  assert.equal(t.fail(new GatewayError("upstream_error", "x")), "");
  assert.throws(
    () => createMessagesStreamTranslator({ model: "m", inputTokensEstimate: -1 }),
    RangeError,
  );
});
