import assert from "node:assert/strict";
import type { ChatChunk } from "../formats/chat/types.ts";
import { planChat, planCompletion } from "./fake_model.ts";
import {
  renderChatChunks,
  renderChatCompletion,
  renderTextCompletion,
  renderTextCompletionChunks,
  toolCallId,
} from "./fake_render.ts";
import { parseChatRequest, parseCompletionRequest } from "./fake_request.ts";

const META = { id: "chatcmpl-t-1", created: 1_700_000_000, model: "demo-chat" };
const plan = (body: Record<string, unknown>) =>
  planChat(parseChatRequest({ model: "demo-chat", ...body }));

function streamedText(chunks: ChatChunk[]): { content: string; reasoning: string; args: string } {
  let content = "", reasoning = "", args = "";
  for (const c of chunks) {
    const d = c.choices[0]?.delta;
    content += d?.content ?? "";
    reasoning += d?.reasoning_content ?? "";
    for (const t of d?.tool_calls ?? []) args += t.function?.arguments ?? "";
  }
  return { content, reasoning, args };
}

Deno.test("chunks: role first, one token per chunk, finish, then usage only when asked", () => {
  const p = plan({ messages: [{ role: "user", content: "a b" }] });
  const none = renderChatChunks(p, META, { usage: "none", emptyToolCalls: false });
  assert.deepEqual(none.map((c) => c.choices[0]?.delta), [
    { role: "assistant", content: "" },
    { content: "Echo:" },
    { content: " a" },
    { content: " b" },
    {},
  ]);
  assert.deepEqual(none.map((c) => c.choices[0]?.finish_reason), [null, null, null, null, "stop"]);
  assert.ok(none.every((c) => !("usage" in c)));

  const after = renderChatChunks(p, META, { usage: "after_finish", emptyToolCalls: false });
  assert.equal(after.length, 6);
  const last = after[5];
  assert.deepEqual(last?.choices, []);
  assert.deepEqual(last?.usage, p.usage);
  assert.ok(after.slice(0, 5).every((c) => c.usage === null));

  const inFinish = renderChatChunks(p, META, { usage: "in_finish", emptyToolCalls: false });
  assert.equal(inFinish.length, 5);
  assert.deepEqual(inFinish[4]?.usage, p.usage);
  assert.equal(inFinish[4]?.choices[0]?.finish_reason, "stop");
});

Deno.test("streamed and non-streamed renderings carry the same text", () => {
  const p = plan({ reasoning_effort: "high", messages: [{ role: "user", content: "x y z" }] });
  const whole = renderChatCompletion(p, META, { emptyToolCalls: false });
  const parts = streamedText(renderChatChunks(p, META, { usage: "none", emptyToolCalls: false }));
  assert.equal(whole.choices[0]?.message.content, parts.content);
  assert.equal(whole.choices[0]?.message.reasoning_content, parts.reasoning);
  assert.equal(parts.reasoning, "Considering: x y z");
  assert.deepEqual(whole.usage, p.usage);
});

Deno.test("tool call chunks: header with id/type/name and empty arguments, then fragments", () => {
  const p = plan({
    tools: [{ type: "function", function: { name: "lookup" } }],
    tool_choice: "required",
    messages: [{ role: "user", content: "weather in Paris" }],
  });
  const chunks = renderChatChunks(p, META, { usage: "none", emptyToolCalls: false });
  const header = chunks[1]?.choices[0]?.delta.tool_calls?.[0];
  assert.deepEqual(header, {
    index: 0,
    id: toolCallId(META.id),
    type: "function",
    function: { name: "lookup", arguments: "" },
  });
  const { args, content } = streamedText(chunks);
  assert.equal(content, "");
  assert.deepEqual(JSON.parse(args), { query: "weather in Paris" });
  assert.equal(chunks.at(-1)?.choices[0]?.finish_reason, "tool_calls");

  const whole = renderChatCompletion(p, META, { emptyToolCalls: false });
  assert.equal(whole.choices[0]?.message.content, null);
  assert.deepEqual(whole.choices[0]?.message.tool_calls, [{
    id: toolCallId(META.id),
    type: "function",
    function: { name: "lookup", arguments: args },
  }]);
});

Deno.test("empty_tool_calls quirk adds tool_calls: [] to deltas and messages", () => {
  const p = plan({ messages: [{ role: "user", content: "a" }] });
  const chunks = renderChatChunks(p, META, { usage: "none", emptyToolCalls: true });
  assert.ok(chunks.every((c) => Array.isArray(c.choices[0]?.delta.tool_calls)));
  assert.ok(chunks.every((c) => c.choices[0]?.delta.tool_calls?.length === 0));
  const whole = renderChatCompletion(p, META, { emptyToolCalls: true });
  assert.deepEqual(whole.choices[0]?.message.tool_calls, []);
});

Deno.test("legacy completion renders whole and as chunks", () => {
  const p = planCompletion(parseCompletionRequest({ model: "m", prompt: ["a", "b c"] }));
  const meta = { ...META, id: "cmpl-t-1" };
  const whole = renderTextCompletion(p, meta);
  assert.deepEqual(whole.choices.map((c) => [c.index, c.text, c.finish_reason]), [
    [0, "Echo: a", "stop"],
    [1, "Echo: b c", "stop"],
  ]);
  const chunks = renderTextCompletionChunks(p, meta, { usage: "after_finish" });
  const byIndex = ["", ""];
  for (const c of chunks) for (const ch of c.choices) byIndex[ch.index] += ch.text;
  assert.deepEqual(byIndex, ["Echo: a", "Echo: b c"]);
  assert.deepEqual(chunks.at(-1)?.choices, []);
  assert.deepEqual(chunks.at(-1)?.usage, p.usage);
});
