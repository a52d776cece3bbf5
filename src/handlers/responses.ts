/** `POST /v1/responses` (OpenAI Responses format): translated to chat, or forwarded to native upstreams. */
import type { InferenceEndpoint } from "./inference_state.ts";
import {
  type ChatResponse,
  chatToResponsesResponse,
  checkChatAgainstModel,
  createResponsesStreamTranslator,
  nativeBody,
  nativeResponsesPassthrough,
  parseResponsesRequest,
  upstreamChatBody,
  withModel,
} from "../formats/mod.ts";
import { basePlan, costOf, nativeOrTranslated } from "./plan.ts";
import { outputReserve } from "./output_reserve.ts";
import { chatPromptTokens, defaultOutputOf } from "./prompt_tokens.ts";
import { bytesToHex } from "../aci/mod.ts";

export const responsesEndpoint: InferenceEndpoint = {
  endpoint: "/v1/responses",
  errorFormat: "openai",
  plan(body, { catalog, config, now, randomBytes }, reuse) {
    const p = parseResponsesRequest(body);
    const model = catalog.chatModel(p.model);
    checkChatAgainstModel(p.chat, model, false);
    const prompt = chatPromptTokens(
      p.chat,
      model,
      p.model,
      p.chat.max_tokens,
      "input",
      defaultOutputOf(model, config.limits.default_output_reserve),
      reuse,
    );
    const promptTokens = prompt.reserve;
    const createdAt = Math.floor(now() / 1000);
    const out = outputReserve(
      model,
      p.chat.max_tokens,
      config.limits.default_output_reserve,
      promptTokens,
    );
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
      nativeOrTranslated("responses", {
        path: "/v1/responses",
        body: (c) => nativeBody(body, c.upstreamModel, { max_output_tokens: out.cap }),
        respond: (u) => withModel(u, p.model),
        translator: () => nativeResponsesPassthrough(p.model),
      }, {
        path: "/v1/chat/completions",
        body: (c) => upstreamChatBody(p.chat, model, c.upstreamModel, out.cap),
        respond: (u: ChatResponse) =>
          chatToResponsesResponse(u, p.model, { createdAt, echo: p.echo }),
        translator: () =>
          createResponsesStreamTranslator({
            model: p.model,
            createdAt,
            echo: p.echo,
            id: "resp_" + bytesToHex(randomBytes(24)),
            inputTokensEstimate: prompt.exact(),
            cost: costOf(model.config.pricing, estimate),
          }),
      }),
    );
  },
};
