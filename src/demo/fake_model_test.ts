import assert from "node:assert/strict";
import { GatewayError } from "../http/errors.ts";
import {
  ARGUMENT_FRAGMENT_CHARS,
  planChat,
  planCompletion,
  tokenize,
  wordCount,
} from "./fake_model.ts";
import { parseChatRequest, parseCompletionRequest } from "./fake_request.ts";

const chat = (body: Record<string, unknown>) =>
  planChat(parseChatRequest({ model: "demo-chat", ...body }));
const user = (content: unknown) => ({ role: "user", content });
const TOOLS = [
  { type: "function", function: { name: "lookup", parameters: { type: "object" } } },
  { type: "function", function: { name: "lookup_v2" } },
];

Deno.test("tokenize keeps each word's leading whitespace and round-trips the text", () => {
  assert.deepEqual(tokenize("Echo: hello  big\nworld "), ["Echo:", " hello", "  big", "\nworld "]);
  assert.equal(tokenize("Echo: hello  big\nworld ").join(""), "Echo: hello  big\nworld ");
  assert.deepEqual(tokenize(""), []);
  assert.deepEqual(tokenize("   "), []);
  assert.equal(wordCount(" a b\tc "), 3);
});

Deno.test("chat echoes the last user message; usage counts words of every message", () => {
  const plan = chat({
    messages: [
      { role: "system", content: "be brief" },
      user("first question"),
      { role: "assistant", content: "an answer" },
      user("hello there"),
    ],
  });
  assert.equal(plan.content.join(""), "Echo: hello there");
  assert.equal(plan.finishReason, "stop");
  assert.equal(plan.toolCall, null);
  assert.deepEqual(plan.reasoning, []);
  assert.deepEqual(plan.usage, { prompt_tokens: 8, completion_tokens: 3, total_tokens: 11 });
});

Deno.test("array content: text parts echoed, image parts acknowledged as [image]", () => {
  const plan = chat({
    messages: [user([
      { type: "text", text: "what is" },
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
      { type: "text", text: "this?" },
    ])],
  });
  assert.equal(plan.content.join(""), "Echo: what is [image] this?");
  assert.equal(plan.usage.prompt_tokens, 3, "image parts carry no words");
});

Deno.test("max_tokens and max_completion_tokens truncate with finish_reason length", () => {
  const long = user("one two three four five");
  const a = chat({ messages: [long], max_tokens: 3 });
  assert.deepEqual(a.content, ["Echo:", " one", " two"]);
  assert.equal(a.finishReason, "length");
  assert.equal(a.usage.completion_tokens, 3);
  const b = chat({ messages: [long], max_completion_tokens: 2, max_tokens: 50 });
  assert.deepEqual(b.content, ["Echo:", " one"]);
  assert.equal(b.finishReason, "length");
  const c = chat({ messages: [long], max_tokens: 6 });
  assert.equal(c.finishReason, "stop", "a limit equal to the reply length does not truncate");
});

Deno.test("stop strings cut at the earliest match with finish_reason stop", () => {
  const plan = chat({ messages: [user("alpha beta gamma delta")], stop: ["delta", " gamma"] });
  assert.equal(plan.content.join(""), "Echo: alpha beta");
  assert.equal(plan.finishReason, "stop");
  const single = chat({ messages: [user("alpha beta")], stop: "beta" });
  assert.equal(single.content.join(""), "Echo: alpha ");
});

Deno.test("tool call: by mention, by required, by named choice; never with choice none", () => {
  const mention = chat({ messages: [user("please call lookup_v2 for Paris")], tools: TOOLS });
  assert.equal(mention.toolCall?.name, "lookup_v2", "the longest mentioned name wins");
  assert.equal(mention.finishReason, "tool_calls");
  assert.deepEqual(mention.content, []);
  const args = mention.toolCall?.argumentFragments.join("") ?? "";
  assert.deepEqual(JSON.parse(args), { query: "please call lookup_v2 for Paris" });
  for (const f of mention.toolCall?.argumentFragments ?? []) {
    assert.ok(Array.from(f).length <= ARGUMENT_FRAGMENT_CHARS);
  }
  assert.equal(mention.usage.completion_tokens, mention.toolCall?.argumentFragments.length);

  const required = chat({ messages: [user("weather?")], tools: TOOLS, tool_choice: "required" });
  assert.equal(required.toolCall?.name, "lookup");
  const named = chat({
    messages: [user("weather?")],
    tools: TOOLS,
    tool_choice: { type: "function", function: { name: "lookup_v2" } },
  });
  assert.equal(named.toolCall?.name, "lookup_v2");
  const auto = chat({ messages: [user("weather?")], tools: TOOLS });
  assert.equal(auto.toolCall, null);
  const none = chat({ messages: [user("call lookup")], tools: TOOLS, tool_choice: "none" });
  assert.equal(none.toolCall, null);
  const noTools = chat({ messages: [user("call lookup")] });
  assert.equal(noTools.toolCall, null);
});

Deno.test("a tool_choice naming an unknown function is a 400 on tool_choice", () => {
  assert.throws(
    () =>
      chat({
        messages: [user("x")],
        tools: TOOLS,
        tool_choice: { type: "function", function: { name: "nope" } },
      }),
    (e: unknown) => e instanceof GatewayError && e.status === 400 && e.param === "tool_choice",
  );
});

Deno.test("a tool result as last message is answered, not called again", () => {
  const plan = chat({
    tools: TOOLS,
    tool_choice: "required",
    messages: [
      user("call lookup for Paris"),
      {
        role: "assistant",
        content: null,
        tool_calls: [{
          id: "call_1",
          type: "function",
          function: { name: "lookup", arguments: "{}" },
        }],
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny, 21C" },
    ],
  });
  assert.equal(plan.toolCall, null);
  assert.equal(plan.content.join(""), "Tool said: sunny, 21C");
});

Deno.test("reasoning comes with reasoning_effort or a model named *reason*", () => {
  const a = chat({ messages: [user("why sky blue")], reasoning_effort: "low", max_tokens: 1 });
  assert.equal(a.reasoning.join(""), "Considering: why sky blue");
  assert.deepEqual(a.content, ["Echo:"], "the token limit bounds the visible reply only");
  assert.equal(a.usage.completion_tokens, 5);
  assert.deepEqual(a.usage.completion_tokens_details, { reasoning_tokens: 4 });
  const b = planChat(parseChatRequest({ model: "demo-reasoner", messages: [user("x")] }));
  assert.equal(b.reasoning.join(""), "Considering: x");
});

Deno.test("response_format json_object / json_schema reply with valid JSON", () => {
  const obj = chat({ messages: [user("hi there")], response_format: { type: "json_object" } });
  assert.deepEqual(JSON.parse(obj.content.join("")), { echo: "hi there" });
  const schema = chat({
    messages: [user("hi there")],
    response_format: {
      type: "json_schema",
      json_schema: {
        name: "x",
        schema: {
          type: "object",
          properties: {
            text: { type: "string" },
            words: { type: "integer" },
            ok: { type: "boolean" },
            tags: { type: "array" },
          },
        },
      },
    },
  });
  assert.deepEqual(JSON.parse(schema.content.join("")), {
    text: "hi there",
    words: 2,
    ok: true,
    tags: [],
  });
});

Deno.test("invalid requests are 400s naming the parameter, without echoing values", () => {
  const cases: [unknown, string][] = [
    [{ model: "m", messages: [] }, "messages"],
    [{ model: "m", messages: [{ role: "user", content: "secret" }], max_tokens: 0 }, "max_tokens"],
    [
      { model: "m", messages: [{ role: "user", content: "secret" }], max_tokens: 1.5 },
      "max_tokens",
    ],
    [{ model: "m", messages: [{ role: "bot", content: "secret" }] }, "messages[0].role"],
    [
      { model: "m", messages: [{ role: "user", content: [{ type: "text" }] }] },
      "messages[0].content[0].type",
    ],
  ];
  for (const [body, param] of cases) {
    assert.throws(() => parseChatRequest(body), (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.equal(e.status, 400);
      assert.equal(e.param, param);
      assert.ok(!e.message.includes("secret"));
      return true;
    });
  }
  assert.throws(() => parseChatRequest([1]), GatewayError);
});

Deno.test("legacy completions: one choice per prompt, stop and max_tokens, usage", () => {
  const plan = planCompletion(parseCompletionRequest({
    model: "m",
    prompt: ["a b c", "d e"],
    max_tokens: 3,
  }));
  assert.deepEqual(plan.choices.map((c) => c.tokens.join("")), ["Echo: a b", "Echo: d e"]);
  assert.deepEqual(plan.choices.map((c) => c.finishReason), ["length", "stop"]);
  assert.deepEqual(plan.usage, { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 });
});

Deno.test("planning is deterministic", () => {
  const body = { messages: [user("same input")], tools: TOOLS, tool_choice: "required" };
  assert.deepEqual(chat(body), chat(body));
});
