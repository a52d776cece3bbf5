/** `POST /v1/embeddings`: the embeddings plan for the shared pipeline (never streamed). */
import type { InferenceEndpoint } from "./inference_state.ts";
import {
  checkEmbeddingAgainstModel,
  embeddingDimension,
  parseEmbeddingRequest,
  upstreamEmbeddingBody,
} from "../formats/embeddings.ts";
import { GatewayError } from "../http/errors.ts";
import { usageField } from "./plan.ts";

export const embeddingsEndpoint: InferenceEndpoint = {
  endpoint: "/v1/embeddings",
  errorFormat: "openai",
  plan(body, { catalog }) {
    const p = parseEmbeddingRequest(body);
    const model = catalog.embeddingModel(p.model);
    const promptTokens = checkEmbeddingAgainstModel(p.body, model);
    const count = typeof p.body.input === "string" ? 1 : p.body.input.length;
    return {
      modelId: p.model,
      provider: p.provider,
      routes: model.config.routes,
      stream: false,
      estimate: {
        promptTokens,
        outputTokens: 0,
        maxPromptTokens: model.config.max_input_tokens * count,
      },
      pricing: { prompt: model.config.pricing.prompt, completion: 0 },
      upstreamPath: () => "/v1/embeddings",
      upstreamBody: (c) => upstreamEmbeddingBody(p.body, c.upstreamModel, model),
      respond: (u) =>
        embeddingsForClient(
          u,
          p.model,
          count,
          p.body.dimensions ?? model.config.default_dimensions,
        ),
      usage: (u) => {
        const x = usageField(u);
        return x ? { prompt_tokens: x.prompt_tokens, completion_tokens: 0 } : undefined;
      },
      chatId: () => null,
      translator: () => {
        throw new GatewayError("internal", "embeddings are not streamed");
      },
    };
  },
};

/**
 * Check the upstream's list (one result per input, in input order by `index`)
 * and echo the client's model id. Vectors are passed through untouched.
 */
function embeddingsForClient(u: unknown, model: string, count: number, dims: number): unknown {
  const list = u as { data?: unknown; usage?: unknown };
  if (!list || !Array.isArray(list.data) || list.data.length !== count) {
    throw new GatewayError("upstream_error", "upstream returned the wrong number of embeddings");
  }
  const data = [...list.data as { index?: unknown }[]].sort((a, b) =>
    Number(a.index) - Number(b.index)
  );
  data.forEach((d, i) => {
    if (d.index !== i) {
      throw new GatewayError("upstream_error", "upstream returned embeddings with bad indices");
    }
    // The dimension the catalog (or the request) promised, never the upstream's own default.
    if (embeddingDimension((d as { embedding?: unknown }).embedding) !== dims) {
      throw new GatewayError(
        "upstream_error",
        `upstream returned embeddings of another dimension than ${dims}`,
      );
    }
  });
  return { object: "list", data, model, usage: list.usage };
}
