/** `POST /v1/completions` (legacy): the text-completion plan for the shared pipeline. */
import type { InferenceEndpoint } from "./inference_state.ts";
import {
  completionForClient,
  countCompletionPrompts,
  createOpenAiStreamPassthrough,
  parseCompletionRequest,
  upstreamCompletionBody,
} from "../formats/mod.ts";
import { badParam } from "../http/mod.ts";
import { basePlan, costOf } from "./plan.ts";
import { outputReserve } from "./output_reserve.ts";
import { checkContextLength } from "../tokens/mod.ts";

export const completionsEndpoint: InferenceEndpoint = {
  endpoint: "/v1/completions",
  errorFormat: "openai",
  plan(body, { catalog, config }) {
    const p = parseCompletionRequest(body);
    const model = catalog.chatModel(p.model);
    const limit = model.config.max_output_length;
    if (p.body.max_tokens !== undefined && p.body.max_tokens > limit) {
      throw badParam("max_tokens", `at most ${limit} output tokens for model ${model.id}`);
    }
    // Every prompt of an array gets its own completions: n of them, or best_of generated.
    const prompts = typeof p.body.prompt === "string" ? 1 : p.body.prompt.length;
    const perPrompt = Math.max(p.body.n ?? 1, p.body.best_of ?? 1);
    const counts = countCompletionPrompts(
      p.body.prompt,
      model.tokenizer,
      model.config.context_length,
    );
    counts.forEach((n, i) =>
      checkContextLength({
        promptTokens: n,
        requestedOutput: p.body.max_tokens,
        contextLength: model.config.context_length,
        modelId: p.model,
        param: typeof p.body.prompt === "string" ? "prompt" : `prompt[${i}]`,
      })
    );
    const promptTokens = counts.reduce((a, n) => a + n, 0);
    const out = outputReserve(
      model,
      p.body.max_tokens,
      config.limits.default_output_reserve,
      Math.max(...counts),
    );
    const estimate = {
      promptTokens,
      outputTokens: out.perCompletion * perPrompt * prompts,
      maxPromptTokens: model.config.context_length * prompts,
    };
    return basePlan(p, model, estimate, {
      upstreamPath: () => "/v1/completions",
      upstreamBody: (c) =>
        upstreamCompletionBody({ ...p.body, max_tokens: out.cap }, c.upstreamModel),
      respond: (u) => completionForClient(u, p.model),
      translator: () =>
        createOpenAiStreamPassthrough({
          model: p.model,
          clientWantsUsage: p.clientWantsUsage,
          cost: costOf(model.config.pricing, estimate),
        }),
    });
  },
};
