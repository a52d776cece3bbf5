/**
 * LangChain's ChatAnthropic and ChatOpenAI (`@langchain/anthropic`,
 * `@langchain/openai`, pinned in deno.json) against the real gateway and the
 * demo upstream (issue 31): answers, streams, `withStructuredOutput` through
 * Anthropic's `output_config.format` and OpenAI's `json_schema`, and
 * `maxTokens` on a `max_completion_tokens` model.
 */
import { ChatAnthropic } from "@langchain/anthropic";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";
import assert from "node:assert/strict";
import { withRecordedGateway } from "./support/recorded_gateway.ts";
import type { TestGateway } from "./support/gateway.ts";

const anthropic = (gw: TestGateway, model = "demo/echo") =>
  new ChatAnthropic({
    model,
    apiKey: gw.apiKey,
    anthropicApiUrl: gw.url,
    maxTokens: 100,
    maxRetries: 0,
  });

const openai = (gw: TestGateway, model: string) =>
  new ChatOpenAI({
    model,
    apiKey: gw.apiKey,
    configuration: { baseURL: gw.baseURL },
    maxTokens: 60,
    maxRetries: 0,
  });

Deno.test("LangChain ChatAnthropic: invoke, stream, withStructuredOutput(jsonSchema)", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const m = anthropic(gw);
    const r = await m.invoke("hello langchain");
    assert.equal(r.content, "Echo: hello langchain");
    let streamed = "";
    for await (const c of await m.stream("stream me")) streamed += String(c.content);
    assert.equal(streamed, "Echo: stream me");

    const city = await m.withStructuredOutput(z.object({ city: z.string() }), {
      method: "jsonSchema",
    }).invoke("a city please");
    assert.deepEqual(city, { city: "a city please" });
    const up = sent("/v1/chat/completions").at(-1)!;
    assert.equal((up.response_format as { type: string }).type, "json_schema");
  });
});

Deno.test("LangChain ChatOpenAI: maxTokens on a max_completion_tokens model; withStructuredOutput", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const next = openai(gw, "demo/echo-next");
    const r = await next.invoke("hi there");
    assert.match(String(r.content), /Echo: hi there/);
    const up = sent("/v1/chat/completions").at(-1)!;
    assert.equal(up.max_completion_tokens, 60);
    assert.ok(!("max_tokens" in up));

    const city = await openai(gw, "demo/echo").withStructuredOutput(
      z.object({ city: z.string() }),
    ).invoke("a city");
    assert.deepEqual(city, { city: "a city" });
  });
});

Deno.test("strict_token_parameter keeps the spec's 400 for the other token parameter", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const before = sent("/v1/chat/completions").length;
    await assert.rejects(
      () => openai(gw, "demo/echo-next").invoke("hi"),
      (e: Error) => /does not accept 'max_tokens'; use 'max_completion_tokens'/.test(e.message),
    );
    assert.equal(sent("/v1/chat/completions").length, before);
  }, (c) => {
    c.models.find((m) => m.id === "demo/echo-next")!.strict_token_parameter = true;
  });
});
