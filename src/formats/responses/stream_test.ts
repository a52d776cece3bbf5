import assert from "node:assert/strict";
import { createResponsesStreamTranslator } from "./stream.ts";
import { decodeEvents, delta, types, usageChunk } from "../messages/testing.ts";
import { GatewayError } from "../../http/errors.ts";

Deno.test("responses stream: reasoning → text → function call, exact event order and payloads", () => {
  const t = createResponsesStreamTranslator({
    model: "client-m",
    createdAt: 1700000000,
    id: "resp_t",
  });
  let sse = "";
  sse += t.chunk(delta({ role: "assistant" }));
  sse += t.chunk(delta({ reasoning_content: "hm" }));
  sse += t.chunk(delta({ content: "Hel" }));
  sse += t.chunk(delta({ content: "lo" }));
  sse += t.chunk(
    delta({
      tool_calls: [{
        index: 0,
        id: "call_1",
        type: "function",
        function: { name: "f", arguments: "" },
      }],
    }),
  );
  sse += t.chunk(delta({ tool_calls: [{ index: 0, function: { arguments: '{"x":' } }] }));
  sse += t.chunk(
    delta({ tool_calls: [{ index: 0, function: { arguments: "2}" } }] }, "tool_calls"),
  );
  sse += t.chunk(usageChunk(30, 8, { completion_tokens_details: { reasoning_tokens: 1 } }));
  sse += t.end();
  assert.equal(t.end(), "");
  const evs = decodeEvents(sse);
  for (const [i, e] of evs.entries()) {
    assert.equal(e.event, e.data.type);
    assert.equal(e.data.sequence_number, i);
  }
  assert.deepEqual(types(evs), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
  ]);
  const created = evs[0]!.data.response as Record<string, unknown>;
  assert.equal(created.id, "resp_t");
  assert.equal(created.status, "in_progress");
  assert.deepEqual(created.output, []);
  assert.equal(created.created_at, 1700000000);
  const msgAdded = evs[8]!.data;
  const msgItem = msgAdded.item as Record<string, unknown>;
  assert.deepEqual(msgAdded, {
    type: "response.output_item.added",
    sequence_number: 8,
    output_index: 1,
    item: {
      type: "message",
      id: msgItem.id,
      status: "in_progress",
      role: "assistant",
      content: [],
    },
  });
  assert.deepEqual(evs[10]!.data, {
    type: "response.output_text.delta",
    sequence_number: 10,
    item_id: msgItem.id,
    output_index: 1,
    content_index: 0,
    delta: "Hel",
    logprobs: [],
  });
  assert.equal(evs[12]!.data.text, "Hello");
  const fcItem = evs[15]!.data.item as Record<string, unknown>;
  assert.deepEqual(fcItem, {
    type: "function_call",
    id: fcItem.id,
    call_id: "call_1",
    name: "f",
    arguments: "",
    status: "in_progress",
  });
  assert.equal(evs[18]!.data.arguments, '{"x":2}');
  const final = evs[20]!.data.response as Record<string, unknown>;
  assert.equal(final.status, "completed");
  const output = final.output as Array<Record<string, unknown>>;
  assert.deepEqual(output.map((o) => [o.type, o.status]), [
    ["reasoning", "completed"],
    ["message", "completed"],
    ["function_call", "completed"],
  ]);
  assert.deepEqual(output[0]!.content, [{ type: "reasoning_text", text: "hm" }]);
  assert.deepEqual(output[1]!.content, [{
    type: "output_text",
    text: "Hello",
    annotations: [],
    logprobs: [],
  }]);
  assert.equal(output[2]!.arguments, '{"x":2}');
  assert.deepEqual(final.usage, {
    input_tokens: 30,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 8,
    output_tokens_details: { reasoning_tokens: 1 },
    total_tokens: 38,
  });
});

Deno.test("responses stream: keepAlive starts the response, then sends a bare newline", () => {
  const t = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  const first = decodeEvents(t.keepAlive());
  assert.deepEqual(types(first), ["response.created", "response.in_progress"]);
  assert.equal(t.keepAlive(), "\n");
  const rest = decodeEvents(t.chunk(delta({ content: "x" })) + t.end());
  assert.equal(rest[0]!.data.sequence_number, 2);
  assert.equal(types(rest).at(-1), "response.completed");
  assert.equal(t.keepAlive(), "");
});

Deno.test("responses stream: random response id when none is given, stable across events", () => {
  const t = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  const evs = decodeEvents(t.chunk(delta({ content: "x" })) + t.end());
  const ids = evs.filter((e) => e.data.response).map((e) => (e.data.response as { id: string }).id);
  assert.equal(new Set(ids).size, 1);
  assert.match(ids[0]!, /^resp_[0-9a-f]{32}$/);
});

Deno.test("responses stream: interleaved tool arguments throw upstream_error", () => {
  const t = createResponsesStreamTranslator({ model: "m", createdAt: 1 });
  t.chunk(delta({ tool_calls: [{ index: 0, id: "a", function: { name: "f", arguments: "{" } }] }));
  t.chunk(delta({ tool_calls: [{ index: 1, id: "b", function: { name: "g", arguments: "{" } }] }));
  assert.throws(
    () => t.chunk(delta({ tool_calls: [{ index: 0, function: { arguments: "}" } }] })),
    (e: unknown) => e instanceof GatewayError && e.kind === "upstream_error",
  );
});
