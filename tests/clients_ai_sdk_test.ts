/**
 * Vercel AI SDK (`ai` with `@ai-sdk/anthropic` and `@ai-sdk/openai-compatible`,
 * pinned in deno.json) against the real gateway and the demo upstream (issue
 * 31): non-streamed and streamed answers, multi-step tools, structured output
 * through Anthropic's `output_config.format`, and a generic OpenAI-compatible
 * provider sending `max_tokens` to a `max_completion_tokens` model.
 */
import { generateText, Output, stepCountIs, streamText, tool } from "ai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { z } from "zod";
import assert from "node:assert/strict";
import { withRecordedGateway } from "./support/recorded_gateway.ts";
import type { TestGateway } from "./support/gateway.ts";

// The SDK warns on the console about models it does not know; not under test.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;

const anthropicFor = (gw: TestGateway) =>
  createAnthropic({ baseURL: gw.baseURL, apiKey: gw.apiKey });

Deno.test("AI SDK anthropic: non-streamed answer; text blocks carry exactly Anthropic's members", async () => {
  await withRecordedGateway(async ({ gw }) => {
    const r = await generateText({
      model: anthropicFor(gw)("demo/echo"),
      prompt: "hello there",
      maxOutputTokens: 100,
    });
    assert.equal(r.text, "Echo: hello there");
    assert.equal(r.finishReason, "stop");
    assert.ok((r.usage.inputTokens ?? 0) > 0);
    // The raw body: Anthropic omits `citations` on a text block without any.
    const res = await fetch(`${gw.url}/v1/messages`, {
      method: "POST",
      headers: {
        "x-api-key": gw.apiKey,
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
      },
      body: JSON.stringify({
        model: "demo/echo",
        max_tokens: 50,
        messages: [{ role: "user", content: "hi" }],
      }),
    });
    const body = await res.json();
    assert.deepEqual(Object.keys(body.content[0]).sort(), ["text", "type"]);
  });
});

Deno.test("AI SDK anthropic: multi-step tool calling, non-streamed and streamed", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const calls: string[] = [];
    const tools = {
      lookup: tool({
        description: "look something up",
        inputSchema: z.object({ query: z.string() }),
        execute: ({ query }) => {
          calls.push(query);
          return Promise.resolve("sunny");
        },
      }),
    };
    const r = await generateText({
      model: anthropicFor(gw)("demo/echo"),
      prompt: "please call lookup for Paris",
      tools,
      stopWhen: stepCountIs(3),
      maxOutputTokens: 200,
    });
    assert.deepEqual(calls, ["please call lookup for Paris"]);
    assert.equal(r.steps.length, 2);
    assert.equal(r.steps[0].finishReason, "tool-calls");
    assert.match(r.text, /Tool said: .*sunny/);
    // The second step carried the tool result back as a chat `tool` message.
    const second = sent("/v1/chat/completions")[1];
    const msgs = second.messages as { role: string }[];
    assert.deepEqual(msgs.map((m) => m.role), ["user", "assistant", "tool"]);

    const s = streamText({
      model: anthropicFor(gw)("demo/echo"),
      prompt: "please call lookup for Rome",
      tools,
      stopWhen: stepCountIs(3),
      maxOutputTokens: 200,
    });
    assert.match(await s.text, /Tool said: .*sunny/);
    assert.equal((await s.steps).length, 2);
  });
});

Deno.test("AI SDK anthropic: streamed text reports one input token count", async () => {
  await withRecordedGateway(async ({ gw }) => {
    const s = streamText({
      model: anthropicFor(gw)("demo/echo"),
      prompt: "one two three four",
      maxOutputTokens: 100,
    });
    assert.equal(await s.text, "Echo: one two three four");
    const usage = await s.usage;
    assert.ok((usage.inputTokens ?? 0) > 0);
    // The raw stream: message_start and message_delta agree.
    const res = await fetch(`${gw.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": gw.apiKey, "content-type": "application/json" },
      body: JSON.stringify({
        model: "demo/echo",
        max_tokens: 50,
        stream: true,
        messages: [{ role: "user", content: "one two three four" }],
      }),
    });
    const text = await res.text();
    const inputs = [...text.matchAll(/"input_tokens":(\d+)/g)].map((m) => Number(m[1]));
    assert.equal(inputs.length, 2, text);
    assert.equal(inputs[0], inputs[1]);
    assert.equal(inputs[0], usage.inputTokens);
  });
});

Deno.test("AI SDK anthropic: structured output via output_config.format is mapped, not dropped", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const r = await generateText({
      model: anthropicFor(gw)("demo/echo"),
      prompt: "name a city",
      maxOutputTokens: 100,
      output: Output.object({ schema: z.object({ city: z.string() }) }),
      providerOptions: { anthropic: { structuredOutputMode: "outputFormat" } },
    });
    assert.deepEqual(r.output, { city: "name a city" });
    const up = sent("/v1/chat/completions").at(-1)!;
    const rf = up.response_format as { type: string; json_schema: { schema: unknown } };
    assert.equal(rf.type, "json_schema");
    assert.deepEqual(Object.keys((rf.json_schema.schema as { properties: object }).properties), [
      "city",
    ]);
  });
});

Deno.test("structured output the route cannot do, or output_config members without a mapping: 400 naming them", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const post = (body: Record<string, unknown>) =>
      fetch(`${gw.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": gw.apiKey, "content-type": "application/json" },
        body: JSON.stringify({
          max_tokens: 50,
          messages: [{ role: "user", content: "hi" }],
          ...body,
        }),
      }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const schema = { type: "object", properties: { a: { type: "string" } } };
    // demo/echo-next does not declare structured_outputs.
    const a = await post({
      model: "demo/echo-next",
      output_config: { format: { type: "json_schema", schema } },
    });
    assert.equal(a.status, 400);
    assert.match(a.body.error.message, /output_config\.format/);
    const b = await post({
      model: "demo/echo",
      output_config: { task_budget: { type: "tokens", total: 10 } },
    });
    assert.equal(b.status, 400);
    assert.match(b.body.error.message, /task_budget/);
    const c = await post({ model: "demo/echo", output_config: { effort: "max" } });
    assert.equal(c.status, 400);
    assert.match(c.body.error.message, /output_config\.effort/);
    assert.equal(sent("/v1/chat/completions").length, 0, "nothing refused reached the upstream");
    // The beta's top-level output_format maps the same way.
    const d = await post({ model: "demo/echo", output_format: { type: "json_schema", schema } });
    assert.equal(d.status, 200);
    assert.deepEqual(JSON.parse(d.body.content[0].text), { a: "hi" });
  });
});

Deno.test("AI SDK openai-compatible: max_tokens to a max_completion_tokens model is renamed, not refused", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const provider = createOpenAICompatible({
      name: "gateway",
      baseURL: gw.baseURL,
      apiKey: gw.apiKey,
      includeUsage: true,
    });
    const r = await generateText({
      model: provider("demo/echo-next"),
      prompt: "hi there",
      maxOutputTokens: 40,
    });
    assert.match(r.text, /Echo: hi there/);
    const up = sent("/v1/chat/completions").at(-1)!;
    assert.equal(up.max_completion_tokens, 40);
    assert.equal(up.max_tokens, undefined);
    const s = streamText({ model: provider("demo/echo-next"), prompt: "hey", maxOutputTokens: 40 });
    assert.match(await s.text, /Echo: hey/);
  });
});
