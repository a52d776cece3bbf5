/**
 * `/v1/messages` with the official Anthropic SDK and `/v1/responses` with the
 * official openai SDK, against the real gateway and chat-speaking upstreams.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";

async function withGateway(
  fn: (gw: TestGateway) => Promise<void>,
  opts: Parameters<typeof startTestGateway>[0] = {},
) {
  const gw = await startTestGateway(opts);
  try {
    await fn(gw);
  } finally {
    await gw.close();
  }
}
const anthropic = (gw: TestGateway, apiKey = gw.apiKey) =>
  new Anthropic({ baseURL: gw.url, apiKey, maxRetries: 0 });
const openai = (gw: TestGateway) =>
  new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });

Deno.test("messages.create: text, system blocks, image, stop sequences, receipt header", async () => {
  await withGateway(async (gw) => {
    const client = anthropic(gw);
    const { data: msg, response } = await client.messages.create({
      model: "demo/echo",
      max_tokens: 100,
      system: [{ type: "text", text: "be brief" }],
      messages: [{ role: "user", content: "hello anthropic world" }],
    }).withResponse();
    assert.equal(msg.type, "message");
    assert.equal(msg.role, "assistant");
    assert.equal(msg.model, "demo/echo");
    assert.equal(msg.stop_reason, "end_turn");
    const text = msg.content.filter((b) => b.type === "text").map((b) =>
      b.type === "text" ? b.text : ""
    ).join("");
    assert.match(text, /hello anthropic world/);
    assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0);
    assert.match(response.headers.get("x-receipt-id") ?? "", /^rcpt-/);

    const img = await client.messages.create({
      model: "demo/vision",
      max_tokens: 50,
      messages: [{
        role: "user",
        content: [
          { type: "text", text: "look" },
          {
            type: "image",
            source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" },
          },
        ],
      }],
    });
    assert.match(JSON.stringify(img.content), /image/);

    const cut = await client.messages.create({
      model: "demo/echo",
      max_tokens: 2,
      messages: [{ role: "user", content: "one two three four five" }],
    });
    assert.equal(cut.stop_reason, "max_tokens");
    const stopped = await client.messages.create({
      model: "demo/echo",
      max_tokens: 50,
      stop_sequences: ["three"],
      messages: [{ role: "user", content: "one two three four five" }],
    });
    assert.ok(["end_turn", "stop_sequence"].includes(stopped.stop_reason ?? ""));
    assert.doesNotMatch(JSON.stringify(stopped.content), /four/);
  });
});

Deno.test("messages: tools and a tool_result round trip; streaming to finalMessage()", async () => {
  await withGateway(async (gw) => {
    const client = anthropic(gw);
    const tools: Anthropic.Tool[] = [{
      name: "lookup",
      description: "look up",
      input_schema: { type: "object", properties: { query: { type: "string" } } },
    }];
    const first = await client.messages.create({
      model: "demo/echo",
      max_tokens: 100,
      tools,
      tool_choice: { type: "any" },
      messages: [{ role: "user", content: "please call lookup for cats" }],
    });
    assert.equal(first.stop_reason, "tool_use");
    const use = first.content.find((b) => b.type === "tool_use");
    assert.ok(use && use.type === "tool_use");
    assert.equal(use.name, "lookup");
    assert.equal(typeof use.input, "object");
    const second = await client.messages.create({
      model: "demo/echo",
      max_tokens: 100,
      tools,
      messages: [
        { role: "user", content: "please call lookup for cats" },
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: use.id, content: "cats are great" }],
        },
      ],
    });
    assert.match(JSON.stringify(second.content), /cats are great/);

    const stream = client.messages.stream({
      model: "demo/echo",
      max_tokens: 100,
      messages: [{ role: "user", content: "stream this reply" }],
    });
    let deltas = 0;
    stream.on("text", () => deltas++);
    const final = await stream.finalMessage();
    assert.ok(deltas > 1);
    assert.match(JSON.stringify(final.content), /stream this reply/);
    assert.equal(final.stop_reason, "end_turn");
    assert.ok(final.usage.input_tokens > 0);
    assert.ok(final.usage.output_tokens > 0);

    const toolStream = client.messages.stream({
      model: "demo/echo",
      max_tokens: 100,
      tools,
      tool_choice: { type: "tool", name: "lookup" },
      messages: [{ role: "user", content: "find dogs" }],
    });
    const tfinal = await toolStream.finalMessage();
    const tu = tfinal.content.find((b) => b.type === "tool_use");
    assert.ok(tu && tu.type === "tool_use");
    assert.deepEqual(Object.keys(tu.input as object), ["query"]);
    assert.equal(tfinal.stop_reason, "tool_use");
  });
});

Deno.test("messages: error classes in the Anthropic envelope", async () => {
  await withGateway(async (gw) => {
    const m = {
      model: "demo/echo",
      max_tokens: 10,
      messages: [{ role: "user" as const, content: "hi" }],
    };
    await assert.rejects(
      anthropic(gw).messages.create({ ...m, max_tokens: 0 }),
      Anthropic.BadRequestError,
    );
    await assert.rejects(
      anthropic(gw, "cgw-nope").messages.create(m),
      Anthropic.AuthenticationError,
    );
    await assert.rejects(
      anthropic(gw).messages.create({ ...m, model: "demo/none" }),
      Anthropic.NotFoundError,
    );
    const poor = await gw.newKey({ credits: 0 });
    await assert.rejects(anthropic(gw, poor).messages.create(m), Anthropic.PermissionDeniedError);
    const limited = await gw.newKey({ tier: "enterprise", rpm: 1, tpm: 1_000_000 });
    await anthropic(gw, limited).messages.create(m);
    await assert.rejects(anthropic(gw, limited).messages.create(m), Anthropic.RateLimitError);
    const raw = await fetch(`${gw.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": gw.apiKey },
      body: JSON.stringify({ model: "demo/echo", messages: [] }),
    });
    const body = await raw.json();
    assert.equal(raw.status, 400);
    assert.equal(body.type, "error");
    assert.equal(body.error.type, "invalid_request_error");
  });
});

Deno.test("responses.create: string input, items, function tools with output follow-up, json_schema, incomplete", async () => {
  await withGateway(async (gw) => {
    const client = openai(gw);
    const r = await client.responses.create({ model: "demo/echo", input: "hello responses" });
    assert.equal(r.object, "response");
    assert.equal(r.status, "completed");
    assert.match(r.output_text, /hello responses/);
    assert.ok(r.usage && r.usage.total_tokens === r.usage.input_tokens + r.usage.output_tokens);

    const items = await client.responses.create({
      model: "demo/echo",
      instructions: "be nice",
      input: [{ role: "user", content: [{ type: "input_text", text: "item input here" }] }],
    });
    assert.match(items.output_text, /item input here/);

    const tools: OpenAI.Responses.Tool[] = [{
      type: "function",
      name: "lookup",
      description: "look up",
      parameters: { type: "object", properties: { query: { type: "string" } } },
      strict: false,
    }];
    const call = await client.responses.create({
      model: "demo/echo",
      input: "please call lookup for owls",
      tools,
      tool_choice: "required",
    });
    const fc = call.output.find((o) => o.type === "function_call");
    assert.ok(fc && fc.type === "function_call");
    assert.equal(fc.name, "lookup");
    const follow = await client.responses.create({
      model: "demo/echo",
      tools,
      input: [
        { role: "user", content: "please call lookup for owls" },
        { type: "function_call", call_id: fc.call_id, name: fc.name, arguments: fc.arguments },
        { type: "function_call_output", call_id: fc.call_id, output: "owls are wise" },
      ],
    });
    assert.match(follow.output_text, /owls are wise/);

    const json = await client.responses.create({
      model: "demo/echo",
      input: "give json",
      text: {
        format: { type: "json_schema", name: "x", schema: { type: "object" }, strict: false },
      },
    });
    assert.equal(typeof JSON.parse(json.output_text), "object");

    const cut = await client.responses.create({
      model: "demo/echo",
      input: "one two three four",
      max_output_tokens: 2,
    });
    assert.equal(cut.status, "incomplete");
    assert.equal(cut.incomplete_details?.reason, "max_output_tokens");

    await assert.rejects(
      client.responses.create({ model: "demo/echo", input: "x", previous_response_id: "resp_123" }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && /no server-side state/.test(e.message),
    );
    await assert.rejects(
      client.responses.create({ model: "demo/echo", input: "x", store: true }),
      OpenAI.BadRequestError,
    );
  });
});

Deno.test("responses.stream to finalResponse()", async () => {
  await withGateway(async (gw) => {
    const client = openai(gw);
    const stream = client.responses.stream({
      model: "demo/echo",
      input: "streaming responses now",
    });
    const seqs: number[] = [];
    stream.on("event", (e) => seqs.push(e.sequence_number));
    const final = await stream.finalResponse();
    assert.equal(final.status, "completed");
    assert.match(final.output_text, /streaming responses now/);
    assert.ok(final.usage && final.usage.output_tokens > 0);
    assert.ok(seqs.length > 4);
    seqs.forEach((s, i) =>
      i > 0 && assert.ok(s > seqs[i - 1], "sequence_number strictly increasing")
    );

    const fstream = client.responses.stream({
      model: "demo/echo",
      input: "please call lookup for bats",
      tools: [{ type: "function", name: "lookup", parameters: { type: "object" }, strict: false }],
      tool_choice: "required",
    });
    const ff = await fstream.finalResponse();
    assert.ok(ff.output.some((o) => o.type === "function_call" && o.name === "lookup"));
  });
});

Deno.test("the routing block and refusals work on both formats", async () => {
  await withGateway(async (gw) => {
    const post = (path: string, body: unknown) =>
      fetch(`${gw.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
        body: JSON.stringify(body),
      });
    gw.plain.resetStats();
    gw.secure.resetStats();
    const m = await post("/v1/messages", {
      model: "demo/echo",
      max_tokens: 10,
      messages: [{ role: "user", content: "x" }],
      provider: { aci_session_ids: ["f".repeat(64)] },
    });
    assert.equal(m.status, 503);
    assert.match(m.headers.get("x-receipt-id") ?? "", /^rcpt-/);
    assert.equal((await m.json()).type, "error");
    const r = await post("/v1/responses", {
      model: "demo/vision",
      input: "x",
      provider: { zdr: true },
    });
    assert.equal(r.status, 404);
    await r.body?.cancel();
    const z = await post("/v1/responses", {
      model: "demo/echo",
      input: "x",
      provider: { zdr: true },
    });
    assert.equal(z.status, 200);
    await z.body?.cancel();
    assert.equal(gw.plain.stats.total, 0);
  });
});

Deno.test("an idle Anthropic stream gets event: ping keep-alives; the SDK still assembles the message", async () => {
  await withGateway(async (gw) => {
    gw.plain.setFault({ kind: "token_delay", ms: 250 });
    gw.secure.setFault({ kind: "token_delay", ms: 250 });
    const res = await fetch(`${gw.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": gw.apiKey },
      body: JSON.stringify({
        model: "demo/echo",
        max_tokens: 20,
        stream: true,
        messages: [{ role: "user", content: "slow one two" }],
      }),
    });
    const raw = await res.text();
    assert.match(raw, /event: ping\ndata: \{"type":"ping"\}/);
    assert.match(raw, /event: message_stop/);
    const final = await anthropic(gw).messages.stream({
      model: "demo/echo",
      max_tokens: 20,
      messages: [{ role: "user", content: "slow one two" }],
    }).finalMessage();
    assert.match(JSON.stringify(final.content), /slow one two/);
  }, { configure: (c) => (c.limits.sse_keepalive_ms = 60) });
});
