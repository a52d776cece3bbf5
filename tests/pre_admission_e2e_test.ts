/**
 * Work before admission is neither free nor unthrottled (#25 items 1 and 2),
 * against the real gateway on loopback: a key that cannot pay is refused
 * before its body is read; refusals count against the key's requests per
 * minute; `count_tokens` is charged too and counts within the context.
 */
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { startTestGateway } from "./support/gateway.ts";
import { sleep } from "../src/store/transient.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Sends a request head announcing a 1 MB body that never comes; returns the response head. */
async function headWithoutBody(url: string, path: string, key: string): Promise<string> {
  const port = Number(new URL(url).port);
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await c.write(enc.encode(
      `POST ${path} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n` +
        `authorization: Bearer ${key}\r\ncontent-length: 1000000\r\n\r\n`,
    ));
    const buf = new Uint8Array(8192);
    let text = "";
    const t0 = performance.now();
    while (!text.includes("\r\n\r\n") && performance.now() - t0 < 10_000) {
      const n = await Promise.race([c.read(buf), sleep(10_000).then(() => null)]);
      if (n === null) break;
      text += dec.decode(buf.subarray(0, n));
    }
    return text;
  } finally {
    c.close();
  }
}

Deno.test("a key that cannot pay is refused before its body is read (403), a paying one is not", async () => {
  const gw = await startTestGateway();
  try {
    const broke = await gw.newKey({ credits: 0 });
    const head = await headWithoutBody(gw.url, "/v1/chat/completions", broke);
    assert.match(head, /^HTTP\/1\.1 403 /, `answered without the body: ${head.slice(0, 80)}`);
    // A key with credits announcing the same body is waiting for it, not refused.
    const paying = await gw.newKey({ credits: 10 });
    const port = Number(new URL(gw.url).port);
    const c = await Deno.connect({ hostname: "127.0.0.1", port });
    await c.write(enc.encode(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n" +
        `authorization: Bearer ${paying}\r\ncontent-length: 1000000\r\n\r\n`,
    ));
    const early = await Promise.race([
      c.read(new Uint8Array(1024)).then(() => "answered"),
      sleep(500).then(() => "waiting"),
    ]);
    c.close();
    assert.equal(early, "waiting");
  } finally {
    await gw.close();
  }
});

Deno.test("every refusal counts against the key's requests per minute: past it, 429 before the body", async () => {
  const gw = await startTestGateway();
  try {
    const key = await gw.newKey({ rpm: 5 });
    const bad = () =>
      fetch(`${gw.baseURL}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "demo/echo", messages: [{ role: "nobody", content: "x" }] }),
      }).then(async (r) => {
        await r.body?.cancel();
        return r.status;
      });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await bad());
    // Five invalid requests were refused (400) and filled the bucket; the sixth is a 429.
    assert.deepEqual(statuses, [400, 400, 400, 400, 400, 429]);
    const head = await headWithoutBody(gw.url, "/v1/chat/completions", key);
    assert.match(head, /^HTTP\/1\.1 429 /);
    assert.match(head, /retry-after: \d+/i);
    // Another key is untouched.
    const other = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "demo/echo", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(other.status, 200);
    await other.body?.cancel();
  } finally {
    await gw.close();
  }
});

Deno.test("count_tokens: charged to the key's requests per minute and counted within the context", async () => {
  const gw = await startTestGateway();
  try {
    const key = await gw.newKey({ rpm: 3 });
    const client = new Anthropic({ baseURL: gw.url, apiKey: key, maxRetries: 0 });
    const count = (content: string) =>
      client.messages.countTokens({ model: "demo/echo", messages: [{ role: "user", content }] });
    const ok = await count("hello there");
    assert.ok(ok.input_tokens > 0);
    // 1 MB of one letter: far past demo/echo's 32,768-token context, refused at once.
    await assert.rejects(count("a".repeat(1_000_000)), (e: unknown) => {
      assert.ok(e instanceof Anthropic.BadRequestError, String(e));
      assert.match(String(e), /context length/);
      return true;
    });
    await count("third");
    // Three calls in the minute: the fourth is refused before its body is read.
    await assert.rejects(count("fourth"), (e: unknown) => e instanceof Anthropic.RateLimitError);
    const head = await headWithoutBody(gw.url, "/v1/messages/count_tokens", key);
    assert.match(head, /^HTTP\/1\.1 429 /);
  } finally {
    await gw.close();
  }
});
