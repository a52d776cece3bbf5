import assert from "node:assert/strict";
import { parseResponsesRequest } from "./request.ts";
import { GatewayError } from "../../http/errors.ts";

const SECRET = "SECRET-PROMPT do not log";

function rejects(body: unknown, param: string, contains?: string): void {
  try {
    parseResponsesRequest(body);
  } catch (e) {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.kind, "invalid_request");
    assert.equal(e.param, param);
    assert.ok(!e.message.includes("SECRET"), `message leaks input: ${e.message}`);
    if (contains) assert.ok(e.message.includes(contains), e.message);
    return;
  }
  assert.fail(`expected 400 on ${param}`);
}

Deno.test("responses request: string input, instructions first, sampling, max_output_tokens, stream", () => {
  const r = parseResponsesRequest({
    model: "m",
    input: "hi",
    instructions: "be brief",
    temperature: 1.5,
    top_p: 0.5,
    max_output_tokens: 64,
    stream: true,
    store: false,
    metadata: { k: "v" },
    provider: { aci_verified: true },
  });
  assert.equal(r.stream, true);
  assert.deepEqual(r.provider, { aci_verified: true });
  assert.deepEqual(r.chat, {
    model: "m",
    messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }],
    temperature: 1.5,
    top_p: 0.5,
    max_tokens: 64,
    stream: true,
    stream_options: { include_usage: true },
  });
  assert.equal(r.echo.instructions, "be brief");
  assert.deepEqual(r.echo.metadata, { k: "v" });
  assert.equal(r.echo.max_output_tokens, 64);
});

Deno.test("responses request: item list with messages, images, function calls merged, outputs, reasoning dropped", () => {
  const r = parseResponsesRequest({
    model: "m",
    input: [
      { role: "developer", content: "rules" },
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "what is this" },
          { type: "input_image", image_url: "https://x.test/a.png", detail: "high" },
        ],
      },
      { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "opaque" },
      {
        type: "message",
        role: "assistant",
        content: [{ type: "output_text", text: "checking", annotations: [] }],
      },
      { type: "function_call", call_id: "c1", name: "look", arguments: '{"a":1}' },
      { type: "function_call", call_id: "c2", name: "look", arguments: "{}" },
      { type: "function_call_output", call_id: "c1", output: "one" },
      {
        type: "function_call_output",
        call_id: "c2",
        output: [{ type: "input_text", text: "two" }],
      },
      { type: "function_call", call_id: "c3", name: "again", arguments: "{}" },
    ],
  });
  assert.deepEqual(r.chat.messages, [
    { role: "system", content: "rules" },
    {
      role: "user",
      content: [
        { type: "text", text: "what is this" },
        { type: "image_url", image_url: { url: "https://x.test/a.png", detail: "high" } },
      ],
    },
    {
      role: "assistant",
      content: "checking",
      tool_calls: [
        { id: "c1", type: "function", function: { name: "look", arguments: '{"a":1}' } },
        { id: "c2", type: "function", function: { name: "look", arguments: "{}" } },
      ],
    },
    { role: "tool", tool_call_id: "c1", content: "one" },
    { role: "tool", tool_call_id: "c2", content: "two" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c3", type: "function", function: { name: "again", arguments: "{}" } }],
    },
  ]);
});

Deno.test("responses request: tools, tool_choice, text.format, reasoning.effort", () => {
  const r = parseResponsesRequest({
    model: "m",
    input: "x",
    tools: [{
      type: "function",
      name: "f",
      description: "d",
      parameters: { type: "object" },
      strict: true,
    }],
    tool_choice: { type: "function", name: "f" },
    parallel_tool_calls: false,
    text: {
      format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true },
    },
    reasoning: { effort: "low" },
  });
  assert.deepEqual(r.chat.tools, [
    {
      type: "function",
      function: { name: "f", description: "d", parameters: { type: "object" }, strict: true },
    },
  ]);
  assert.deepEqual(r.chat.tool_choice, { type: "function", function: { name: "f" } });
  assert.equal(r.chat.parallel_tool_calls, false);
  assert.deepEqual(r.chat.response_format, {
    type: "json_schema",
    json_schema: { name: "out", schema: { type: "object" }, strict: true },
  });
  assert.equal(r.chat.reasoning_effort, "low");
  assert.deepEqual(r.echo.tool_choice, { type: "function", name: "f" });
  assert.equal(r.echo.tools.length, 1);
  const j = parseResponsesRequest({
    model: "m",
    input: "x",
    text: { format: { type: "json_object" } },
    tool_choice: "required",
  });
  assert.deepEqual(j.chat.response_format, { type: "json_object" });
  assert.equal(j.chat.tool_choice, "required");
  const t = parseResponsesRequest({ model: "m", input: "x", text: { format: { type: "text" } } });
  assert.equal(t.chat.response_format, undefined);
});

Deno.test("responses request: stateful features are rejected with an explanation", () => {
  const ok = { model: "m", input: SECRET };
  rejects(
    { ...ok, previous_response_id: "resp_1" },
    "previous_response_id",
    "keeps no server-side state",
  );
  rejects({ ...ok, store: true }, "store", "keeps no server-side state");
  rejects({ ...ok, conversation: "conv_1" }, "conversation", "keeps no server-side state");
  rejects({ ...ok, background: true }, "background");
  rejects(
    { ...ok, input: [{ type: "item_reference", id: "msg_1" }] },
    "input[0].type",
    "no server-side state",
  );
});

Deno.test("responses request: validation names paths and never echoes prompt text", () => {
  const ok = { model: "m", input: SECRET };
  rejects({ ...ok, model: 3 }, "model");
  rejects({ ...ok, input: 3 }, "input");
  rejects({ ...ok, input: [] }, "input");
  rejects({ ...ok, temperature: 2.5 }, "temperature");
  rejects({ ...ok, max_output_tokens: 0 }, "max_output_tokens");
  rejects(
    { ...ok, tools: [{ type: "web_search_preview" }] },
    "tools[0].type",
    "web_search_preview",
  );
  rejects({ ...ok, tools: [{ type: SECRET }] }, "tools[0].type");
  rejects({ ...ok, tools: [{ type: "function" }] }, "tools[0].name");
  rejects(
    { ...ok, input: [{ role: "user", content: SECRET }, { role: "robot", content: SECRET }] },
    "input[1].role",
  );
  rejects(
    { ...ok, input: [{ role: "user", content: [{ type: "input_audio", data: SECRET }] }] },
    "input[0].content[0].type",
  );
  rejects({
    ...ok,
    input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }],
  }, "input[0].content[0].image_url");
  rejects(
    {
      ...ok,
      input: [{
        role: "assistant",
        content: [{ type: "input_image", image_url: "https://x.test/i.png" }],
      }],
    },
    "input[0].content[0].type",
  );
  rejects(
    { ...ok, input: [{ type: "function_call", name: "f", arguments: "{}" }] },
    "input[0].call_id",
  );
  rejects(
    { ...ok, input: [{ type: "function_call_output", call_id: "c", output: 5 }] },
    "input[0].output",
  );
  rejects(
    { ...ok, input: [{ type: "computer_call", call_id: "c" }] },
    "input[0].type",
    "computer_call",
  );
  rejects({ ...ok, input: ["just a string"] }, "input[0]");
  rejects({ ...ok, text: { format: { type: "json_schema", schema: {} } } }, "text.format.name");
  rejects({ ...ok, reasoning: { effort: "extreme" } }, "reasoning.effort");
});
