import assert from "node:assert/strict";
import { chatToResponsesResponse } from "./response.ts";
import { parseResponsesRequest } from "./request.ts";
import type { ChatResponse } from "../chat/types.ts";

function chat(
  message: ChatResponse["choices"][0]["message"],
  finish: ChatResponse["choices"][0]["finish_reason"],
): ChatResponse {
  return {
    id: "chatcmpl-xyz",
    object: "chat.completion",
    created: 1,
    model: "up",
    choices: [{ index: 0, message, finish_reason: finish }],
    usage: {
      prompt_tokens: 20,
      completion_tokens: 10,
      total_tokens: 30,
      prompt_tokens_details: { cached_tokens: 4 },
      completion_tokens_details: { reasoning_tokens: 3 },
    },
  };
}

Deno.test("responses response: reasoning, message and function call items with SDK-required fields", () => {
  const { echo } = parseResponsesRequest({
    model: "client-m",
    input: "x",
    instructions: "sys",
    temperature: 0.3,
  });
  const r = chatToResponsesResponse(
    chat({
      role: "assistant",
      content: "answer",
      reasoning_content: "because",
      tool_calls: [{
        id: "call_1",
        type: "function",
        function: { name: "f", arguments: '{"a":1}' },
      }],
    }, "tool_calls"),
    "client-m",
    { createdAt: 1700000000, echo },
  );
  assert.match(r.id, /^resp_[0-9a-f]{32}$/);
  assert.equal(
    r.id,
    chatToResponsesResponse(chat({ role: "assistant", content: "" }, "stop"), "m", { createdAt: 0 })
      .id,
  );
  assert.equal(r.object, "response");
  assert.equal(r.created_at, 1700000000);
  assert.equal(r.status, "completed");
  assert.equal(r.model, "client-m");
  assert.equal(r.instructions, "sys");
  assert.equal(r.temperature, 0.3);
  assert.equal(r.error, null);
  assert.equal(r.incomplete_details, null);
  assert.equal(r.parallel_tool_calls, true);
  assert.deepEqual(r.tools, []);
  assert.equal(r.tool_choice, "auto");
  assert.equal(r.store, false);
  assert.equal("output_text" in r, false);
  const [rs, msg, fc] = r.output;
  assert.ok(rs?.type === "reasoning" && msg?.type === "message" && fc?.type === "function_call");
  assert.match(rs.id, /^rs_/);
  assert.deepEqual(rs.content, [{ type: "reasoning_text", text: "because" }]);
  assert.deepEqual(rs.summary, []);
  assert.match(msg.id, /^msg_/);
  assert.deepEqual({ ...msg, id: "" }, {
    type: "message",
    id: "",
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text: "answer", annotations: [], logprobs: [] }],
  });
  assert.match(fc.id, /^fc_/);
  assert.deepEqual({ ...fc, id: "" }, {
    type: "function_call",
    id: "",
    call_id: "call_1",
    name: "f",
    arguments: '{"a":1}',
    status: "completed",
  });
  assert.deepEqual(r.usage, {
    input_tokens: 20,
    input_tokens_details: { cached_tokens: 4 },
    output_tokens: 10,
    output_tokens_details: { reasoning_tokens: 3 },
    total_tokens: 30,
  });
});

Deno.test("responses response: length → incomplete with max_output_tokens, last item incomplete", () => {
  const r = chatToResponsesResponse(chat({ role: "assistant", content: "trunc" }, "length"), "m", {
    createdAt: 5,
    id: "resp_fixed",
  });
  assert.equal(r.id, "resp_fixed");
  assert.equal(r.status, "incomplete");
  assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
  assert.equal(r.output[0]?.status, "incomplete");
  const cf = chatToResponsesResponse(
    chat({ role: "assistant", content: "x" }, "content_filter"),
    "m",
    { createdAt: 5 },
  );
  assert.deepEqual(cf.incomplete_details, { reason: "content_filter" });
});

Deno.test("responses response: empty reply has no items; missing usage is null", () => {
  const c = chat({ role: "assistant", content: null }, "stop");
  delete c.usage;
  const r = chatToResponsesResponse(c, "m", { createdAt: 1 });
  assert.deepEqual(r.output, []);
  assert.equal(r.usage, null);
});
