/** `POST /v1/responses` (OpenAI Responses format): translated to chat, or forwarded to native upstreams. */
import type { InferenceEndpoint } from "./inference_state.ts";
import {
  chatToResponsesResponse,
  createResponsesStreamTranslator,
  parseResponsesRequest,
} from "../formats/responses/mod.ts";
import { checkChatAgainstModel, upstreamChatBody } from "../formats/chat.ts";
import type { ChatResponse } from "../formats/chat_types.ts";
import { nativeResponsesPassthrough, withModel } from "../formats/native_passthrough.ts";
import { costOf, idOf, nativeOrTranslated, usageField } from "./plan.ts";
import { outputReserve } from "./output_reserve.ts";
import { chatPromptTokens, defaultOutputOf } from "./prompt_tokens.ts";
import { bytesToHex } from "../aci/hex.ts";

export const responsesEndpoint: InferenceEndpoint = {
  endpoint: "/v1/responses",
  errorFormat: "openai",
  plan(body, { catalog, config, now, randomBytes }) {
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
    );
    const promptTokens = prompt.reserve;
    const createdAt = Math.floor(now() / 1000);
    const out = outputReserve(
      model,
      p.chat.max_tokens,
      config.limits.default_output_reserve,
      promptTokens,
    );
    return {
      modelId: p.model,
      provider: p.provider,
      routes: model.config.routes,
      stream: p.stream,
      estimate: {
        promptTokens,
        outputTokens: out.perCompletion,
        maxPromptTokens: model.config.context_length,
        exactPromptTokens: prompt.exact,
      },
      pricing: model.config.pricing,
      tokenizer: model.tokenizer,
      usage: usageField,
      chatId: idOf,
      ...nativeOrTranslated("responses", {
        path: "/v1/responses",
        body: (c) => ({
          max_output_tokens: out.cap,
          ...(body as Record<string, unknown>),
          model: c.upstreamModel,
          provider: undefined,
        }),
        respond: (u) => withModel(u, p.model),
        translator: () => nativeResponsesPassthrough(p.model),
      }, {
        path: "/v1/chat/completions",
        body: (c) => upstreamChatBody(p.chat, model, c.upstreamModel, out.cap),
        respond: (u) =>
          chatToResponsesResponse(u as ChatResponse, p.model, { createdAt, echo: p.echo }),
        translator: () =>
          createResponsesStreamTranslator({
            model: p.model,
            createdAt,
            echo: p.echo,
            id: "resp_" + bytesToHex(randomBytes(24)),
            inputTokensEstimate: prompt.exact(),
            cost: costOf(model.config.pricing),
          }),
      }),
    };
  },
};
