/** `/v1/embeddings`: validation against the embedding model, the upstream body and the answer. Pure. */
import { countText, newBpeBudget } from "../../tokens/mod.ts";
import { z } from "zod";
import { badParam, GatewayError } from "../../http/mod.ts";
import type { EmbeddingModel } from "../../catalog/mod.ts";
import { parseWith } from "../zod_error.ts";
import { mediaUrl } from "../chat/request.ts";
import type { TokenUsage } from "../stream_translator.ts";
import { usageField } from "../upstream_fields.ts";

export const MAX_EMBEDDING_INPUTS = 2048;

const imageItem = z.strictObject({
  type: z.literal("image_url"),
  image_url: z.union([mediaUrl, z.strictObject({ url: mediaUrl })]),
});
const videoItem = z.strictObject({
  type: z.literal("video_url"),
  video_url: z.union([mediaUrl, z.strictObject({ url: mediaUrl })]),
});
// OpenAI refuses empty inputs (a zero-length text has no embedding); so does the gateway.
const EMPTY_INPUT = "input must not be an empty string";
const item = z.union([z.string().min(1, EMPTY_INPUT), imageItem, videoItem], {
  error: () => "inputs are strings or {type: image_url|video_url} items",
});

export const embeddingRequestSchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([
    z.string().min(1, EMPTY_INPUT),
    z.array(item).min(1, "input must not be empty").max(
      MAX_EMBEDDING_INPUTS,
      `at most ${MAX_EMBEDDING_INPUTS} inputs per request`,
    ),
  ]),
  encoding_format: z.enum(["float", "base64"], {
    error: "encoding_format must be 'float' or 'base64'",
  })
    .optional(),
  dimensions: z.number().int().positive().optional(),
  user: z.string().max(256).optional(),
  provider: z.unknown().optional(),
});

/** The validated body; `provider` is dropped (set undefined) before forwarding. */
export type EmbeddingRequest = z.infer<typeof embeddingRequestSchema>;

export interface ParsedEmbedding {
  model: string;
  body: EmbeddingRequest;
  provider: unknown;
}

export function parseEmbeddingRequest(body: unknown): ParsedEmbedding {
  // Checked before zod: a too-long array fails both union arms, and the union's
  // message ("expected string") would hide the limit.
  const input = typeof body === "object" && body !== null
    ? (body as { input?: unknown }).input
    : undefined;
  if (Array.isArray(input) && input.length > MAX_EMBEDDING_INPUTS) {
    throw badParam(
      "input",
      `at most ${MAX_EMBEDDING_INPUTS} inputs per request (got ${input.length})`,
    );
  }
  const r = parseWith(embeddingRequestSchema, body);
  return { model: r.model, body: { ...r, provider: undefined }, provider: r.provider };
}

export function checkEmbeddingAgainstModel(body: EmbeddingRequest, model: EmbeddingModel): number {
  const c = model.config;
  if (body.dimensions !== undefined) {
    const r = c.dimensions_range;
    if (!r) {
      throw badParam("dimensions", `model ${model.id} does not support the 'dimensions' parameter`);
    }
    if (body.dimensions < r[0] || body.dimensions > r[1]) {
      throw badParam(
        "dimensions",
        `dimensions must be between ${r[0]} and ${r[1]} for model ${model.id}`,
      );
    }
  }
  const inputs = typeof body.input === "string" ? [body.input] : body.input;
  let total = 0;
  const budget = newBpeBudget(); // one BPE budget for all the inputs of a request
  inputs.forEach((x, i) => {
    if (typeof x === "string") {
      const t = countText(x, model.tokenizer, c.max_input_tokens, budget);
      if (t > c.max_input_tokens) {
        throw badParam(
          `input[${i}]`,
          `input exceeds ${c.max_input_tokens} tokens for model ${model.id}`,
        );
      }
      total += t;
    } else {
      const kind = x.type === "image_url" ? "image" : "video";
      if (!c.input_modalities.includes(kind)) {
        throw badParam(`input[${i}]`, `model ${model.id} does not accept ${kind} input`);
      }
      total += 256;
    }
  });
  return total;
}

/**
 * The upstream body. A model that takes `dimensions` gets the catalog's
 * `default_dimensions` when the client named none, so the answer has the
 * dimension the catalog advertises, not whatever the upstream defaults to.
 */
export function upstreamEmbeddingBody(
  body: EmbeddingRequest,
  upstreamModel: string,
  model?: EmbeddingModel,
): EmbeddingRequest {
  const out: EmbeddingRequest = { ...body, model: upstreamModel };
  if (out.dimensions === undefined && model?.config.dimensions_range) {
    out.dimensions = model.config.default_dimensions;
  }
  return out;
}

/** The dimension of one returned embedding (float array, or base64 little-endian float32). */
export function embeddingDimension(e: unknown): number | null {
  if (Array.isArray(e)) return e.length;
  if (typeof e === "string") {
    const pad = e.endsWith("==") ? 2 : e.endsWith("=") ? 1 : 0;
    const bytes = (e.length / 4) * 3 - pad;
    return Number.isInteger(bytes / 4) ? bytes / 4 : null;
  }
  return null;
}

/**
 * Check the upstream's list (one result per input, in input order by `index`)
 * and echo the client's model id. Vectors are passed through untouched.
 */
export function embeddingsForClient(
  u: unknown,
  model: string,
  count: number,
  dims: number,
): unknown {
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

/** The upstream's usage for an embedding: prompt tokens only. */
export function embeddingUsage(u: unknown): TokenUsage | undefined {
  const x = usageField(u);
  return x ? { prompt_tokens: x.prompt_tokens, completion_tokens: 0 } : undefined;
}
