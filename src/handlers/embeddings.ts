/** `POST /v1/embeddings`: the embeddings plan for the shared pipeline (never streamed). */
import type { InferenceEndpoint } from "./inference_state.ts";
import {
  checkEmbeddingAgainstModel,
  embeddingsForClient,
  embeddingUsage,
  parseEmbeddingRequest,
  upstreamEmbeddingBody,
} from "../formats/mod.ts";
import { GatewayError } from "../http/mod.ts";
import { basePlan } from "./plan.ts";

export const embeddingsEndpoint: InferenceEndpoint = {
  endpoint: "/v1/embeddings",
  errorFormat: "openai",
  plan(body, { catalog }) {
    const p = parseEmbeddingRequest(body);
    const model = catalog.embeddingModel(p.model);
    const promptTokens = checkEmbeddingAgainstModel(p.body, model);
    const count = typeof p.body.input === "string" ? 1 : p.body.input.length;
    return basePlan(p, model, {
      promptTokens,
      outputTokens: 0,
      maxPromptTokens: model.config.max_input_tokens * count,
    }, {
      upstreamPath: () => "/v1/embeddings",
      upstreamBody: (c) => upstreamEmbeddingBody(p.body, c.upstreamModel, model),
      respond: (u) =>
        embeddingsForClient(
          u,
          p.model,
          count,
          p.body.dimensions ?? model.config.default_dimensions,
        ),
      translator: () => {
        throw new GatewayError("internal", "embeddings are not streamed");
      },
    }, {
      usage: embeddingUsage,
      chatId: () => null,
    });
  },
};
