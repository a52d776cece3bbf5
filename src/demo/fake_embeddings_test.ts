import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { fakeEmbeddings, fakeVector, float32ToBase64 } from "./fake_embeddings.ts";
import { parseEmbeddingRequest } from "./fake_request.ts";

const norm = (v: ArrayLike<number>) => Math.sqrt(Array.from(v).reduce((s, x) => s + x * x, 0));

Deno.test("fakeVector is deterministic, unit length, and differs by seed", () => {
  const a = fakeVector("text:hello", 64);
  assert.equal(a.length, 64);
  assert.deepEqual(a, fakeVector("text:hello", 64));
  assert.ok(Math.abs(norm(a) - 1) < 1e-5);
  assert.notDeepEqual(a, fakeVector("text:hellp", 64));
  assert.throws(() => fakeVector("x", 0), RangeError);
  assert.throws(() => fakeVector("x", 2.5), RangeError);
});

Deno.test("base64 is little-endian float32 of the same vector", () => {
  const v = fakeVector("text:x", 5);
  const bytes = Buffer.from(float32ToBase64(v), "base64");
  assert.equal(bytes.length, 20);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < 5; i++) assert.equal(view.getFloat32(i * 4, true), v[i]);
});

Deno.test("embeddings: item kinds, order, dimensions, default dims, usage", () => {
  const res = fakeEmbeddings(
    parseEmbeddingRequest({
      model: "demo-embed",
      input: [
        "two words",
        { type: "image_url", image_url: { url: "https://example.test/a.png" } },
        { type: "video_url", video_url: "https://example.test/a.mp4" },
        [1, 2, 3],
      ],
      dimensions: 12,
    }),
    16,
  );
  assert.deepEqual(res.data.map((d) => d.index), [0, 1, 2, 3]);
  for (const d of res.data) {
    assert.ok(Array.isArray(d.embedding));
    assert.equal(d.embedding.length, 12);
    assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5);
  }
  assert.deepEqual(res.usage, { prompt_tokens: 2 + 1 + 1 + 3, total_tokens: 7 });
  assert.equal(res.model, "demo-embed");

  const single = fakeEmbeddings(parseEmbeddingRequest({ model: "m", input: "two words" }), 16);
  assert.equal(single.data.length, 1);
  assert.equal((single.data[0]?.embedding as number[]).length, 16);
  const tokens = fakeEmbeddings(parseEmbeddingRequest({ model: "m", input: [5, 6] }), 4);
  assert.equal(tokens.data.length, 1, "a flat integer array is one tokenized input");

  const again = fakeEmbeddings(parseEmbeddingRequest({ model: "m", input: ["two words"] }), 12);
  assert.deepEqual(again.data[0]?.embedding, res.data[0]?.embedding);
});

Deno.test("embeddings reject bad dimensions, formats and empty input", () => {
  for (
    const body of [
      { model: "m", input: "x", dimensions: 0 },
      { model: "m", input: "x", encoding_format: "hex" },
      { model: "m", input: [] },
      { model: "m", input: [{ type: "audio_url", audio_url: "x" }] },
    ]
  ) {
    assert.throws(() => parseEmbeddingRequest(body));
  }
});
