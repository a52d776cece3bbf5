/** `/v1/embeddings` requests: validation against the embedding model, and the upstream body. Pure. */
import { z } from "zod";
import { badParam } from "../http/errors.ts";
import type { EmbeddingModel } from "../catalog/catalog.ts";
import { parseWith } from "./zod_error.ts";
import { mediaUrl } from "./chat.ts";
import { MEDIA_TOKENS, textTokens } from "./token_count.ts";

export const MAX_EMBEDDING_INPUTS = 2048;

const imageItem = z.strictObject({
  type: z.literal("image_url"),
  image_url: z.union([mediaUrl, z.strictObject({ url: mediaUrl })]),
});
const videoItem = z.strictObject({
  type: z.literal("video_url"),
  video_url: z.union([mediaUrl, z.strictObject({ url: mediaUrl })]),
});
const item = z.union([z.string(), imageItem, videoItem], {
  error: () => "inputs are strings or {type: image_url|video_url} items",
});

export const embeddingRequestSchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([
    z.string(),
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
  const r = parseWith(embeddingRequestSchema, body);
  return { model: r.model, body: { ...r, provider: undefined }, provider: r.provider };
}

/** Rough token count per text input (4 characters per token). */
function estimate(text: string): number {
  return Math.ceil(text.length / 4);
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
  inputs.forEach((x, i) => {
    if (typeof x === "string") {
      const t = estimate(x);
      if (t > c.max_input_tokens) {
        throw badParam(
          `input[${i}]`,
          `input exceeds ${c.max_input_tokens} tokens for model ${model.id}`,
        );
      }
      total += textTokens(x);
    } else {
      const kind = x.type === "image_url" ? "image" : "video";
      if (!c.input_modalities.includes(kind)) {
        throw badParam(`input[${i}]`, `model ${model.id} does not accept ${kind} input`);
      }
      total += MEDIA_TOKENS;
    }
  });
  // The reservation: an upper bound (see token_count.ts), not the size check's estimate.
  return total;
}

export function upstreamEmbeddingBody(
  body: EmbeddingRequest,
  upstreamModel: string,
): EmbeddingRequest {
  return { ...body, model: upstreamModel };
}
