import assert from "node:assert/strict";
import { chatToMessagesResponse } from "./response.ts";
import type { ChatResponse } from "../chat/types.ts";

function chat(
  message: ChatResponse["choices"][0]["message"],
  finish: ChatResponse["choices"][0]["finish_reason"],
  extra = {},
): ChatResponse {
  return {
    id: "chatcmpl-abc",
    object: "chat.completion",
    created: 1,
    model: "up",
    choices: [{ index: 0, message, finish_reason: finish, ...extra }],
    usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
  };
}

Deno.test("messages response: text reply, usage, deterministic msg_ id", () => {
  const a = chatToMessagesResponse(
    chat({ role: "assistant", content: "hello" }, "stop"),
    "client-model",
  );
  const b = chatToMessagesResponse(
    chat({ role: "assistant", content: "hello" }, "stop"),
    "client-model",
  );
  assert.match(a.id, /^msg_[A-Za-z0-9_-]{24}$/);
  assert.equal(a.id, b.id);
  assert.deepEqual({ ...a, id: "" }, {
    id: "",
    type: "message",
    role: "assistant",
    model: "client-model",
    content: [{ type: "text", text: "hello" }],
    stop_reason: "end_turn",
    stop_sequence: null,
    usage: {
      input_tokens: 11,
      output_tokens: 7,
      cache_creation_input_tokens: null,
      cache_read_input_tokens: null,
    },
  });
});

Deno.test("messages response: thinking, text and tool_use in order; bad JSON arguments become {}", () => {
  const r = chatToMessagesResponse(
    chat({
      role: "assistant",
      content: "let me check",
      reasoning_content: "need tools",
      tool_calls: [
        { id: "call_1", type: "function", function: { name: "get", arguments: '{"city":"Oslo"}' } },
        { id: "call_2", type: "function", function: { name: "bad", arguments: '{"unterminated' } },
        { id: "call_3", type: "function", function: { name: "arr", arguments: "[1,2]" } },
      ],
    }, "tool_calls"),
    "m",
  );
  assert.deepEqual(r.content, [
    { type: "thinking", thinking: "need tools", signature: "" },
    { type: "text", text: "let me check" },
    { type: "tool_use", id: "call_1", name: "get", input: { city: "Oslo" } },
    { type: "tool_use", id: "call_2", name: "bad", input: {} },
    { type: "tool_use", id: "call_3", name: "arr", input: {} },
  ]);
  assert.equal(r.stop_reason, "tool_use");
});

Deno.test("messages response: finish mapping and stop_sequence only when the upstream names a requested one", () => {
  const m = { role: "assistant" as const, content: "x" };
  assert.equal(chatToMessagesResponse(chat(m, "length"), "m").stop_reason, "max_tokens");
  assert.equal(chatToMessagesResponse(chat(m, "content_filter"), "m").stop_reason, "refusal");
  // vLLM reports the matched stop string in a non-standard `stop_reason` field.
  const matched = chatToMessagesResponse(chat(m, "stop", { stop_reason: "END" }), "m", ["END"]);
  assert.equal(matched.stop_reason, "stop_sequence");
  assert.equal(matched.stop_sequence, "END");
  // Upstream silent about the match: never guessed from the text.
  const silent = chatToMessagesResponse(
    chat({ role: "assistant", content: "x END" }, "stop"),
    "m",
    ["END"],
  );
  assert.equal(silent.stop_reason, "end_turn");
  assert.equal(silent.stop_sequence, null);
  // A stop string the client did not ask for (e.g. a template stop) is not reported.
  const other = chatToMessagesResponse(chat(m, "stop", { stop_reason: "<|eot|>" }), "m", ["END"]);
  assert.equal(other.stop_reason, "end_turn");
  // "stop" finish after tool calls is still tool_use.
  const tools = chatToMessagesResponse(
    chat({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }],
    }, "stop"),
    "m",
  );
  assert.equal(tools.stop_reason, "tool_use");
});

Deno.test("messages response: empty reply still has a text block; missing usage is 0", () => {
  const c = chat({ role: "assistant", content: null }, "stop");
  delete c.usage;
  const r = chatToMessagesResponse(c, "m");
  assert.deepEqual(r.content, [{ type: "text", text: "" }]);
  assert.equal(r.usage.input_tokens, 0);
});
