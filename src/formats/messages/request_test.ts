import assert from "node:assert/strict";
import { parseMessagesRequest } from "./request.ts";
import { GatewayError } from "../../http/errors.ts";

const SECRET = "the launch code is 0000 SECRET-PROMPT";

function rejects(body: unknown, param: string): GatewayError {
  try {
    parseMessagesRequest(body);
  } catch (e) {
    assert.ok(e instanceof GatewayError, "expected a GatewayError");
    assert.equal(e.kind, "invalid_request");
    assert.equal(e.param, param);
    assert.ok(!e.message.includes("SECRET"), `message leaks input: ${e.message}`);
    return e;
  }
  assert.fail(`expected 400 on ${param}`);
}

Deno.test("messages request: basic text, system blocks, sampling, stop, metadata", () => {
  const r = parseMessagesRequest({
    model: "m1",
    max_tokens: 100,
    system: [{ type: "text", text: "be brief" }, { type: "text", text: "be kind" }],
    messages: [{ role: "user", content: "hi" }],
    temperature: 0.5,
    top_p: 0.9,
    top_k: 40,
    stop_sequences: ["END"],
    metadata: { user_id: "u-1" },
    provider: { zdr: true, anything: [1] },
  });
  assert.equal(r.model, "m1");
  assert.equal(r.stream, false);
  assert.deepEqual(r.provider, { zdr: true, anything: [1] });
  assert.deepEqual(r.stopSequences, ["END"]);
  assert.deepEqual(r.chat, {
    model: "m1",
    max_tokens: 100,
    messages: [{ role: "system", content: "be brief\nbe kind" }, { role: "user", content: "hi" }],
    temperature: 0.5,
    top_p: 0.9,
    top_k: 40,
    stop: ["END"],
    user: "u-1",
  });
});

Deno.test("messages request: stream sets include_usage", () => {
  const r = parseMessagesRequest({
    model: "m",
    max_tokens: 5,
    stream: true,
    messages: [{ role: "user", content: "x" }],
  });
  assert.equal(r.stream, true);
  assert.equal(r.chat.stream, true);
  assert.deepEqual(r.chat.stream_options, { include_usage: true });
});

Deno.test("messages request: images (base64 and url), tool_use, tool_result ordering, thinking dropped", () => {
  const r = parseMessagesRequest({
    model: "m",
    max_tokens: 10,
    messages: [
      {
        role: "user",
        content: [
          { type: "text", text: "look" },
          {
            type: "image",
            source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" },
          },
          { type: "image", source: { type: "url", url: "https://example.com/a.jpg" } },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "hmm", signature: "sig" },
          { type: "text", text: "calling" },
          { type: "tool_use", id: "toolu_1", name: "get", input: { q: 1 } },
          { type: "tool_use", id: "toolu_2", name: "put", input: {} },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: "42" },
          { type: "text", text: "and also" },
          {
            type: "tool_result",
            tool_use_id: "toolu_2",
            content: [{ type: "text", text: "a" }, { type: "text", text: "b" }],
            is_error: true,
          },
        ],
      },
    ],
  });
  assert.deepEqual(r.chat.messages, [
    {
      role: "user",
      content: [
        { type: "text", text: "look" },
        { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
        { type: "image_url", image_url: { url: "https://example.com/a.jpg" } },
      ],
    },
    {
      role: "assistant",
      content: "calling",
      tool_calls: [
        { id: "toolu_1", type: "function", function: { name: "get", arguments: '{"q":1}' } },
        { id: "toolu_2", type: "function", function: { name: "put", arguments: "{}" } },
      ],
    },
    { role: "tool", tool_call_id: "toolu_1", content: "42" },
    { role: "tool", tool_call_id: "toolu_2", content: "Error: a\nb" },
    { role: "user", content: "and also" },
  ]);
});

Deno.test("messages request: assistant with only tool_use has null content; tool_result with image keeps parts", () => {
  const r = parseMessagesRequest({
    model: "m",
    max_tokens: 10,
    messages: [
      { role: "user", content: "q" },
      { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "shot", input: {} }] },
      {
        role: "user",
        content: [{
          type: "tool_result",
          tool_use_id: "t1",
          content: [{ type: "text", text: "img:" }, {
            type: "image",
            source: { type: "url", url: "https://x.test/i.png" },
          }],
        }],
      },
    ],
  });
  assert.deepEqual(r.chat.messages.slice(1), [
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "t1", type: "function", function: { name: "shot", arguments: "{}" } }],
    },
    {
      role: "tool",
      tool_call_id: "t1",
      content: [{ type: "text", text: "img:" }, {
        type: "image_url",
        image_url: { url: "https://x.test/i.png" },
      }],
    },
  ]);
});

Deno.test("messages request: tools and every tool_choice mapping", () => {
  const base = {
    model: "m",
    max_tokens: 10,
    messages: [{ role: "user", content: "x" }],
    tools: [{ name: "get", description: "d", input_schema: { type: "object", properties: {} } }],
  };
  const r = parseMessagesRequest({ ...base, tool_choice: { type: "auto" } });
  assert.deepEqual(r.chat.tools, [
    {
      type: "function",
      function: { name: "get", description: "d", parameters: { type: "object", properties: {} } },
    },
  ]);
  assert.equal(r.chat.tool_choice, "auto");
  assert.equal(
    parseMessagesRequest({ ...base, tool_choice: { type: "any" } }).chat.tool_choice,
    "required",
  );
  assert.equal(
    parseMessagesRequest({ ...base, tool_choice: { type: "none" } }).chat.tool_choice,
    "none",
  );
  const t = parseMessagesRequest({
    ...base,
    tool_choice: { type: "tool", name: "get", disable_parallel_tool_use: true },
  });
  assert.deepEqual(t.chat.tool_choice, { type: "function", function: { name: "get" } });
  assert.equal(t.chat.parallel_tool_calls, false);
});

Deno.test("messages request: validation names the offending path and never echoes prompt text", () => {
  const ok = { model: "m", max_tokens: 10, messages: [{ role: "user", content: SECRET }] };
  rejects({ ...ok, max_tokens: undefined }, "max_tokens");
  rejects({ ...ok, max_tokens: 1.5 }, "max_tokens");
  rejects({ ...ok, model: "" }, "model");
  rejects({ ...ok, temperature: 2.5 }, "temperature");
  rejects({ ...ok, temperature: -0.1 }, "temperature");
  rejects({ ...ok, messages: [] }, "messages");
  rejects({ ...ok, messages: [{ role: "system", content: SECRET }] }, "messages[0].role");
  rejects({ ...ok, messages: [{ role: "user", content: 5 }] }, "messages[0].content");
  rejects(
    {
      ...ok,
      messages: [{ role: "user", content: SECRET }, {
        role: "user",
        content: [{ type: "video", text: SECRET }],
      }],
    },
    "messages[1].content[0].type",
  );
  rejects(
    {
      ...ok,
      messages: [{
        role: "user",
        content: [{ type: "text", text: SECRET }, { type: "text", text: 7 }],
      }],
    },
    "messages[0].content[1].text",
  );
  rejects(
    {
      ...ok,
      messages: [{ role: "user", content: [{ type: "tool_use", id: "a", name: "b", input: {} }] }],
    },
    "messages[0].content[0].type",
  );
  rejects(
    {
      ...ok,
      messages: [{
        role: "assistant",
        content: [{ type: "tool_result", tool_use_id: "a", content: SECRET }],
      }],
    },
    "messages[0].content[0].type",
  );
  rejects(
    {
      ...ok,
      messages: [{
        role: "user",
        content: [{ type: "image", source: { type: "url", url: "file:///etc/passwd" } }],
      }],
    },
    "messages[0].content[0].source.url",
  );
  rejects({ ...ok, tools: [{ type: "web_search_20250305", name: "web_search" }] }, "tools[0].type");
  rejects({ ...ok, tool_choice: { type: "tool" } }, "tool_choice.name");
  rejects({ ...ok, stop_sequences: "END" }, "stop_sequences");
  rejects(null, "body");
});
