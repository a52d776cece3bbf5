/**
 * Cost and provenance per response (#31): `usage.cost` in credits on every
 * answer that reports usage (OpenRouter's field), the provider and the
 * canonical model an alias resolved to in `x-serving-provider` /
 * `x-serving-model`, and both in the receipt's `route.served` event.
 */
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { fetchReceipt } from "./support/receipt_check.ts";
import { costNano } from "../src/handlers/plan.ts";

/** What the gateway settles for this usage at these prices, in credits. */
function expectedCost(
  u: { prompt_tokens: number; completion_tokens: number },
  pricing: { prompt: number; completion: number },
): number {
  return Number(costNano(u, pricing)) / 1e9;
}

Deno.test("cost and provenance: usage.cost, x-serving-* headers and the receipt's route.served", async () => {
  const gw = await startTestGateway({
    verification: "off",
    configure: (c) => {
      // Only the plain provider serves (the confidential one is unverified without a verifier).
      for (const m of c.models) m.routes = m.routes.filter((r) => r.provider === "plain");
    },
  });
  try {
    const pricing = gw.gateway.ctx.catalog.chatModel("demo/echo").config.pricing;
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const { data, response } = await client.chat.completions.create({
      model: "demo/echo-latest",
      messages: [{ role: "user", content: "what does this cost" }],
    }).withResponse();
    assert.equal(response.headers.get("x-serving-provider"), "plain");
    assert.equal(response.headers.get("x-serving-model"), "demo/echo");
    assert.equal(data.model, "demo/echo-latest"); // the answer echoes what the client asked for
    const usage = data.usage as OpenAI.CompletionUsage & { cost?: number };
    assert.ok(usage.prompt_tokens > 0 && usage.completion_tokens > 0);
    assert.equal(usage.cost, expectedCost(usage, pricing));
    assert.ok(usage.cost! > 0);

    const receipt = await fetchReceipt(gw.url, response.headers.get("x-receipt-id")!, gw.apiKey);
    assert.equal(receipt.status, 200);
    const events = (receipt.body as { event_log: Record<string, unknown>[] }).event_log;
    const served = events.find((e) => e.type === "route.served")!;
    assert.equal(served.provider, "plain");
    assert.equal(served.model_id, "demo/echo");
    assert.equal(served.target_route_id, "plain:demo-chat");

    // Streamed: the usage chunk the client asked for carries the cost too.
    const stream = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "stream the cost" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamed: (OpenAI.CompletionUsage & { cost?: number }) | undefined;
    for await (const c of stream) if (c.usage) streamed = c.usage;
    assert.ok(streamed, "a usage chunk");
    assert.equal(streamed.cost, expectedCost(streamed, pricing));

    // Legacy completions and embeddings report it as well.
    const legacy = await client.completions.create({ model: "demo/echo", prompt: "cost?" });
    const lu = legacy.usage as OpenAI.CompletionUsage & { cost?: number };
    assert.equal(lu.cost, expectedCost(lu, pricing));
    const emb = await client.embeddings.create({ model: "demo/embed-small", input: "cost?" });
    const eu = emb.usage as { prompt_tokens: number; cost?: number };
    const embPricing = gw.gateway.ctx.catalog.embeddingModel("demo/embed-small").config.pricing;
    assert.equal(
      eu.cost,
      expectedCost({ prompt_tokens: eu.prompt_tokens, completion_tokens: 0 }, {
        prompt: embPricing.prompt,
        completion: 0,
      }),
    );

    // Anthropic format: the same headers, and `usage.cost` beside Anthropic's own counts.
    const anthropic = new Anthropic({ baseURL: gw.url, apiKey: gw.apiKey, maxRetries: 0 });
    const { data: msg, response: mres } = await anthropic.messages.create({
      model: "demo/echo-latest",
      max_tokens: 64,
      messages: [{ role: "user", content: "cost in anthropic" }],
    }).withResponse();
    assert.equal(mres.headers.get("x-serving-provider"), "plain");
    assert.equal(mres.headers.get("x-serving-model"), "demo/echo");
    const mu = msg.usage as Anthropic.Usage & { cost?: number };
    assert.equal(
      mu.cost,
      expectedCost(
        { prompt_tokens: mu.input_tokens, completion_tokens: mu.output_tokens },
        pricing,
      ),
    );

    // Streamed in the Anthropic and Responses formats: the final usage carries the cost too.
    // message_start/message_delta report the gateway's own input count (one number for the
    // stream), while the cost is what the upstream's usage settles: the same request answered
    // whole costs the same.
    const same = {
      model: "demo/echo",
      max_tokens: 64,
      messages: [{ role: "user" as const, content: "stream cost in anthropic" }],
    };
    const whole = await anthropic.messages.create(same);
    const mstream = anthropic.messages.stream(same);
    let fu: { input_tokens: number; output_tokens: number; cost?: number } | undefined;
    for await (const e of mstream) {
      if (e.type === "message_delta") fu = e.usage as unknown as typeof fu;
    }
    assert.ok(fu, "message_delta carries usage");
    assert.ok(fu.cost !== undefined && fu.cost > 0, `streamed cost ${fu.cost}`);
    assert.equal(fu.cost, (whole.usage as Anthropic.Usage & { cost?: number }).cost);
    const rstream = await client.responses.create({
      model: "demo/echo",
      input: "stream cost in responses",
      stream: true,
    });
    let rusage: { input_tokens: number; output_tokens: number; cost?: number } | undefined;
    for await (const e of rstream) {
      if (e.type === "response.completed") rusage = e.response.usage as typeof rusage;
    }
    assert.ok(rusage, "response.completed carries usage");
    assert.equal(
      rusage.cost,
      expectedCost(
        { prompt_tokens: rusage.input_tokens, completion_tokens: rusage.output_tokens },
        pricing,
      ),
    );
  } finally {
    await gw.close();
  }
});
