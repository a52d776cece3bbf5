import assert from "node:assert/strict";
import { splitSseFrames, SseFrameBuffer } from "./sse_frames.ts";

Deno.test("splitSseFrames: complete frames out, the incomplete rest kept, CRLF too", () => {
  assert.deepEqual(splitSseFrames("data: a\n\ndata: b\r\n\r\ndata: c"), {
    frames: ["data: a", "data: b"],
    rest: "data: c",
  });
  assert.deepEqual(splitSseFrames("data: x"), { frames: [], rest: "data: x" });
  assert.deepEqual(splitSseFrames("data: x\n\n"), { frames: ["data: x"], rest: "" });
});

/** Feeds `chunks` through a frame buffer, as the stream readers do. */
function feed(chunks: string[]): string[] {
  const b = new SseFrameBuffer();
  return chunks.flatMap((c) => b.push(c));
}

Deno.test("SseFrameBuffer: terminators split across chunks are found", () => {
  const text = "data: a\n\ndata: b\r\n\r\ndata: c\n\n";
  for (let size = 1; size <= text.length; size++) {
    const chunks: string[] = [];
    for (let i = 0; i < text.length; i += size) chunks.push(text.slice(i, i + size));
    assert.deepEqual(feed(chunks), ["data: a", "data: b", "data: c"], `chunks of ${size}`);
  }
});

Deno.test("SseFrameBuffer: text that ends no frame is not rescanned per chunk, and is refused past 16 MiB", () => {
  const chunk = "a".repeat(64 * 1024);
  const t0 = performance.now();
  assert.deepEqual(feed(Array.from({ length: 160 }, () => chunk)), []); // 10 MiB
  // Rescanning from the start each time took ~8 s for 10 MB; one scan is milliseconds.
  assert.ok(performance.now() - t0 < 2_000, `${performance.now() - t0} ms`);
  const b = new SseFrameBuffer();
  assert.throws(() => {
    for (let i = 0; i < 300; i++) b.push(chunk);
  }, /larger than 16 MiB/);
});
