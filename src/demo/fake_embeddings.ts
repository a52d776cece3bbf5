/**
 * Deterministic fake embeddings: each input item (text, token array, image or
 * video URL) seeds SHA-256 in counter mode; the stream of 32-bit words becomes
 * a float32 vector normalized to unit length. Same item and dimensions → the
 * same vector, on every upstream instance.
 */
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { wordCount } from "./fake_model.ts";
import type { FakeEmbeddingItem, FakeEmbeddingRequest } from "./fake_request.ts";

/** One embedding in an OpenAI `embeddings` list response. */
export interface EmbeddingDatum {
  object: "embedding";
  index: number;
  embedding: number[] | string;
}

/** The OpenAI `embeddings` list response. */
export interface EmbeddingResponse {
  object: "list";
  data: EmbeddingDatum[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

function urlOf(ref: string | { url: string }): string {
  return typeof ref === "string" ? ref : ref.url;
}

/** A stable, kind-tagged key for an item: the hash seed, so text "x" and image "x" differ. */
function itemKey(item: FakeEmbeddingItem): string {
  if (typeof item === "string") return `text:${item}`;
  if (Array.isArray(item)) return `tokens:${item.join(",")}`;
  if (item.type === "image_url" && "image_url" in item) return `image_url:${urlOf(item.image_url)}`;
  if ("video_url" in item) return `video_url:${urlOf(item.video_url)}`;
  throw new Error("unreachable embedding item kind");
}

function itemTokens(item: FakeEmbeddingItem): number {
  if (typeof item === "string") return wordCount(item);
  if (Array.isArray(item)) return item.length;
  return 1;
}

/** The deterministic unit-length vector of `dims` float32 values for a seed string. */
export function fakeVector(seed: string, dims: number): Float32Array {
  if (!Number.isInteger(dims) || dims <= 0) throw new RangeError("dims must be a positive integer");
  const raw = new Float64Array(dims);
  let filled = 0;
  for (let block = 0; filled < dims; block++) {
    const digest = createHash("sha256").update(seed).update(`\0${block}`).digest();
    for (let off = 0; off + 4 <= digest.length && filled < dims; off += 4) {
      // Map a uint32 onto [-1, 1).
      raw[filled++] = digest.readUInt32LE(off) / 2 ** 31 - 1;
    }
  }
  let norm = 0;
  for (const v of raw) norm += v * v;
  norm = Math.sqrt(norm);
  const out = new Float32Array(dims);
  // A zero vector is astronomically unlikely; fall back to a unit basis vector if it happens.
  if (norm === 0) out[0] = 1;
  else for (let i = 0; i < dims; i++) out[i] = (raw[i] ?? 0) / norm;
  return out;
}

/** Base64 of the vector as little-endian float32, as OpenAI's `encoding_format: "base64"`. */
export function float32ToBase64(vec: Float32Array): string {
  const bytes = new Uint8Array(vec.length * 4);
  const view = new DataView(bytes.buffer);
  vec.forEach((v, i) => view.setFloat32(i * 4, v, true));
  return Buffer.from(bytes).toString("base64");
}

function isTokenArray(xs: readonly unknown[]): xs is number[] {
  return xs.every((x) => typeof x === "number");
}

/** The items of an `input`: a lone item (including a flat token array) is a list of one. */
function embeddingItems(input: FakeEmbeddingRequest["input"]): FakeEmbeddingItem[] {
  if (!Array.isArray(input)) return [input];
  if (isTokenArray(input)) return [input];
  return input.filter((x): x is FakeEmbeddingItem => typeof x !== "number");
}

/** The embeddings response for a validated request. */
export function fakeEmbeddings(req: FakeEmbeddingRequest, defaultDims: number): EmbeddingResponse {
  const dims = req.dimensions ?? defaultDims;
  const base64 = req.encoding_format === "base64";
  const items = embeddingItems(req.input);
  const data = items.map((item, index): EmbeddingDatum => {
    const vec = fakeVector(itemKey(item), dims);
    return {
      object: "embedding",
      index,
      embedding: base64 ? float32ToBase64(vec) : Array.from(vec),
    };
  });
  const tokens = items.reduce((n, item) => n + itemTokens(item), 0);
  return {
    object: "list",
    data,
    model: req.model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}
