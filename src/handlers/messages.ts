/** `POST /v1/messages` (Anthropic format): translated to chat for chat upstreams, forwarded to native ones. */
import type { InferenceEndpoint } from "./inference_state.ts";
import {
  type ChatResponse,
  chatToMessagesResponse,
  checkChatAgainstModel,
  createMessagesStreamTranslator,
  nativeBody,
  nativeMessagesPassthrough,
  parseMessagesRequest,
  upstreamChatBody,
  withModel,
} from "../formats/mod.ts";
import { basePlan, costOf, nativeOrTranslated } from "./plan.ts";
import { outputReserve } from "./output_reserve.ts";
import { chatPromptTokens, defaultOutputOf } from "./prompt_tokens.ts";

export const messagesEndpoint: InferenceEndpoint = {
  endpoint: "/v1/messages",
  errorFormat: "anthropic",
  plan(body, { catalog, config }, reuse) {
    const p = parseMessagesRequest(body);
    const model = catalog.chatModel(p.model);
    checkChatAgainstModel(p.chat, model, false, {
      max_tokens: "max_tokens",
      response_format: p.formatParam,
      reasoning_effort: "output_config.effort",
    });
    const prompt = chatPromptTokens(
      p.chat,
      model,
      p.model,
      p.chat.max_tokens,
      "messages",
      defaultOutputOf(model, config.limits.default_output_reserve),
      reuse,
    );
    const promptTokens = prompt.reserve;
    const out = outputReserve(model, p.chat.max_tokens, config.limits.default_output_reserve);
    const estimate = {
      promptTokens,
      outputTokens: out.perCompletion,
      maxPromptTokens: prompt.billable,
      exactPromptTokens: prompt.exact,
    };
    return basePlan(
      p,
      model,
      estimate,
      nativeOrTranslated("messages", {
        path: "/v1/messages",
        body: (c) => nativeBody(body, c.upstreamModel),
        respond: (u) => withModel(u, p.model),
        translator: () => nativeMessagesPassthrough(p.model),
      }, {
        path: "/v1/chat/completions",
        body: (c) => upstreamChatBody(p.chat, model, c.upstreamModel, out.cap),
        respond: (u: ChatResponse) => chatToMessagesResponse(u, p.model, p.stopSequences),
        translator: () =>
          createMessagesStreamTranslator({
            model: p.model,
            // Shown to the client (message_start): the exact count, as before.
            inputTokensEstimate: prompt.exact(),
            stopSequences: p.stopSequences,
            cost: costOf(model.config.pricing, estimate),
          }),
      }),
    );
  },
};
