/** `POST /v1/chat/completions`: the chat plan for the shared pipeline. */
import type { InferenceEndpoint } from "./inference_state.ts";
import {
  type ChatResponse,
  chatResponseForClient,
  checkChatAgainstModel,
  createOpenAiStreamPassthrough,
  parseChatRequest,
  upstreamChatBody,
} from "../formats/mod.ts";
import { basePlan, costOf } from "./plan.ts";
import { outputReserve } from "./output_reserve.ts";
import { chatPromptTokens, defaultOutputOf, parsedTextBytes } from "./prompt_tokens.ts";

export const chatEndpoint: InferenceEndpoint = {
  endpoint: "/v1/chat/completions",
  errorFormat: "openai",
  plan(body, { catalog, config }, reuse) {
    const p = parseChatRequest(body);
    const model = catalog.chatModel(p.model);
    checkChatAgainstModel(p.chat, model, true);
    const prompt = chatPromptTokens(
      p.chat,
      model,
      p.model,
      p.chat.max_tokens ?? p.chat.max_completion_tokens,
      "messages",
      defaultOutputOf(model, config.limits.default_output_reserve),
      reuse,
      parsedTextBytes(body),
    );
    const promptTokens = prompt.reserve;
    const out = outputReserve(
      model,
      p.chat.max_tokens ?? p.chat.max_completion_tokens,
      config.limits.default_output_reserve,
      promptTokens,
    );
    const estimate = {
      promptTokens,
      outputTokens: out.perCompletion * (p.chat.n ?? 1),
      maxPromptTokens: prompt.billable,
      exactPromptTokens: prompt.exact,
    };
    return basePlan(p, model, estimate, {
      upstreamPath: () => "/v1/chat/completions",
      upstreamBody: (c) => upstreamChatBody(p.chat, model, c.upstreamModel, out.cap),
      respond: (u: ChatResponse) => chatResponseForClient(u, p.model),
      translator: () =>
        createOpenAiStreamPassthrough({
          model: p.model,
          clientWantsUsage: p.clientWantsUsage,
          obfuscate: p.obfuscate,
          cost: costOf(model.config.pricing, estimate),
        }),
    });
  },
};
