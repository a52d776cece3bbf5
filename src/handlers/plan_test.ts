import assert from "node:assert/strict";
import { basePlan, type PlanSides } from "./plan.ts";
import type { Candidate } from "../routing/select.ts";

const sides: PlanSides<{ id: string }> = {
  upstreamPath: () => "/v1/chat/completions",
  upstreamBody: () => ({}),
  respond: (u) => ({ echoed: u.id }),
  translator: () => {
    throw new Error("not streamed here");
  },
};
const estimate = { promptTokens: 3, outputTokens: 4, maxPromptTokens: 10 };
const routes = [{ provider: "p", model: "m" }];
const c = {} as Candidate;

Deno.test("basePlan: the shared fields from the request and the model; chat-shaped usage and ids", () => {
  const plan = basePlan(
    { model: "alias", provider: { order: ["p"] }, stream: true },
    { config: { routes, pricing: { prompt: 1, completion: 2 } }, tokenizer: "o200k_base" },
    estimate,
    sides,
  );
  assert.equal(plan.modelId, "alias");
  assert.deepEqual(plan.provider, { order: ["p"] });
  assert.equal(plan.routes, routes);
  assert.equal(plan.stream, true);
  assert.equal(plan.estimate, estimate);
  assert.deepEqual(plan.pricing, { prompt: 1, completion: 2 });
  assert.equal(plan.tokenizer, "o200k_base");
  assert.deepEqual(plan.respond({ id: "x" }, c), { echoed: "x" });
  assert.equal(plan.chatId({ id: "chatcmpl-1" }), "chatcmpl-1");
  assert.deepEqual(plan.usage({ usage: { input_tokens: 5, output_tokens: 6 } }), {
    prompt_tokens: 5,
    completion_tokens: 6,
  });
});

Deno.test("basePlan: an input-only price completes at 0; no stream flag is not streamed; overrides", () => {
  const plan = basePlan(
    { model: "e", provider: undefined },
    { config: { routes, pricing: { prompt: 1 } } },
    estimate,
    sides,
    { usage: () => undefined, chatId: () => null },
  );
  assert.deepEqual(plan.pricing, { prompt: 1, completion: 0 });
  assert.equal(plan.stream, false);
  assert.equal(plan.chatId({ id: "x" }), null);
  assert.equal(plan.usage({ usage: { prompt_tokens: 1 } }), undefined);
});
