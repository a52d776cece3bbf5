/**
 * A held stream keeps only what it needs: not the prompt. With a prompt of
 * 256 KB and 16 streams held open, a stream that pinned its request plan, the
 * prompt's bytes or the upstream request would keep several MB of heap alive.
 */
import assert from "node:assert/strict";
import v8 from "node:v8";
import vm from "node:vm";
import { startTestGateway } from "./support/gateway.ts";
import { startCountingUpstream } from "./support/counting_upstream.ts";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

function heapAfterGc(): number {
  gc();
  gc();
  return Deno.memoryUsage().heapUsed;
}

Deno.test("held streams do not keep their prompts alive", async () => {
  const STREAMS = 16;
  const PROMPT = 256 * 1024;
  const upstream = startCountingUpstream({ chunks: 2, gapMs: 0, barrier: true });
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.find((p) => p.name === "plain")!.base_url = upstream.url;
      // 256 KB prompts of one repeated digit are ~87k tokens: room for them in the context.
      c.models.find((m) => m.id === "demo/vision")!.context_length = 1_000_000;
    },
  });
  const client = Deno.createHttpClient({});
  const readers: ReadableStreamDefaultReader<Uint8Array>[] = [];
  try {
    const key = await gw.newKey({ tier: "enterprise", credits: 1_000_000 });
    const open = async (content: string) => {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "demo/vision", // routed to the counting upstream only
          stream: true,
          messages: [{ role: "user", content }],
        }),
        client,
      });
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      assert.equal((await reader.read()).done, false);
      return reader;
    };
    upstream.hold();
    // Warm-up: the same path once, so code and pools exist before measuring.
    readers.push(await open("warm"));
    /** Heap kept by `STREAMS` more held streams with prompts of `size` bytes. */
    const heldHeap = async (size: number) => {
      const before = heapAfterGc();
      // A distinct prompt per stream (nothing shared with the test's own strings once sent).
      for (let i = 0; i < STREAMS; i++) readers.push(await open(String(i % 10).repeat(size)));
      await upstream.waitFor((s) => s.open === readers.length, 10_000);
      return heapAfterGc() - before;
    };
    // The same number of streams with tiny prompts: the fixed per-stream heap of the
    // client, the gateway and the upstream (all in this process).
    const small = await heldHeap(16);
    const large = await heldHeap(PROMPT);
    assert.ok(
      large - small < (STREAMS * PROMPT) / 4,
      `${STREAMS} held streams kept ${((large - small) / 1024).toFixed(0)} KB more heap with ` +
        `${PROMPT / 1024} KB prompts than with tiny ones (${(small / 1024).toFixed(0)} KB)`,
    );
  } finally {
    upstream.release();
    for (const r of readers) await r.cancel().catch(() => {});
    client.close();
    await gw.close();
    await upstream.close();
  }
});
