/**
 * Numbers from upstreams (issue #25 items 6–9), through the real gateway on
 * loopback in front of scripted upstream servers started here: usage that is
 * not a count, usage beyond what the gateway let the upstream do, ledger sums
 * past 2^64, a client that leaves mid-stream, and a stream cut before
 * `[DONE]`. Every wait is on an event (a response, a receipt, a settlement),
 * bounded by the test's own timeout.
 */
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { waitForReceipt } from "./support/receipt_check.ts";
import { getBalance, getUsage } from "../src/admission/credits.ts";
import { MAX_SETTLEMENT_NANO } from "../src/admission/credits.ts";
import { chatTokenCeiling, countChat, countText } from "../src/tokens/count.ts";
import type { GatewayConfig } from "../src/config/schema.ts";

type Script = (body: Record<string, unknown>) => Response | Promise<Response>;

/** A loopback upstream answering each request with the current script. */
function scriptedUpstream() {
  let script: Script = () => new Response("no script", { status: 500 });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => script(await req.json()),
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    set(s: Script) {
      script = s;
    },
    close: () => server.shutdown(),
  };
}

const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
  `data: ${
    JSON.stringify({ id: "chatcmpl-x", object: "chat.completion.chunk", choices, ...extra })
  }\n\n`;

function sseResponse(frames: string[], opts: { hang?: boolean } = {}): Response {
  const enc = new TextEncoder();
  return new Response(
    new ReadableStream({
      start(c) {
        for (const f of frames) c.enqueue(enc.encode(f));
        if (!opts.hang) c.close();
      },
    }),
    { headers: { "content-type": "text/event-stream" } },
  );
}

/** A whole chat answer whose usage is the literal JSON text `usageJson`. */
function wholeWithUsage(usageJson: string): Response {
  return new Response(
    `{"id":"chatcmpl-w","object":"chat.completion","created":1,"model":"m",` +
      `"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
      `"usage":${usageJson}}`,
    { headers: { "content-type": "application/json" } },
  );
}

async function withGateway(
  configure: (c: GatewayConfig) => void,
  credits: number,
  f: (gw: TestGateway, up: ReturnType<typeof scriptedUpstream>) => Promise<void>,
) {
  const up = scriptedUpstream();
  const gw = await startTestGateway({
    credits,
    configure: (c) => {
      c.providers.find((p) => p.name === "plain")!.base_url = up.url;
      // No quota lease: `reserved` and the balance are then exactly the requests' own.
      c.store.quota_leases = false;
      configure(c);
    },
  });
  try {
    await f(gw, up);
  } finally {
    await gw.close();
    await up.close();
  }
}

async function keyIdOf(gw: TestGateway, apiKey = gw.apiKey): Promise<string> {
  const res = await fetch(`${gw.url}/v1/key`, { headers: { authorization: `Bearer ${apiKey}` } });
  return (await res.json()).data.key_id;
}

async function ownKey(gw: TestGateway) {
  const res = await fetch(`${gw.url}/v1/key`, {
    headers: { authorization: `Bearer ${gw.apiKey}` },
  });
  return (await res.json()).data as { reserved: string; balance: string };
}

async function chat(gw: TestGateway, body: Record<string, unknown>) {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
    body: JSON.stringify({
      model: "demo/vision",
      messages: [{ role: "user", content: "hi" }],
      ...body,
    }),
  });
  return { status: res.status, text: await res.text(), receiptId: res.headers.get("x-receipt-id") };
}

const eventsOf = (r: Record<string, unknown>) => r.event_log as Record<string, unknown>[];

Deno.test("usage: a streamed usage that is not a count still completes, stores its receipt and releases the reservation", async () => {
  await withGateway(() => {}, 100, async (gw, up) => {
    const keyId = await keyIdOf(gw);
    for (const bad of ["-5", "2.5", "9007199254740993", "1e400"]) {
      up.set(() =>
        sseResponse([
          chunk([{ index: 0, delta: { role: "assistant", content: "hello there" } }]),
          chunk([{ index: 0, delta: {}, finish_reason: "stop" }]),
          `data: {"id":"chatcmpl-x","object":"chat.completion.chunk","choices":[],` +
          `"usage":{"prompt_tokens":${bad},"completion_tokens":${bad}}}\n\n`,
          "data: [DONE]\n\n",
        ])
      );
      const before = await getUsage(gw.kv, keyId);
      const r = await chat(gw, { stream: true, max_tokens: 50 });
      assert.equal(r.status, 200);
      assert.ok(r.text.endsWith("data: [DONE]\n\n"), `usage ${bad}: stream did not complete`);
      assert.doesNotMatch(r.text, /"error"/);
      const receipt = await waitForReceipt(gw.url, r.receiptId!, gw.apiKey);
      const bounded = eventsOf(receipt).find((e) => e.type === "usage.bounded");
      assert.ok(bounded, `usage ${bad}: no usage.bounded event`);
      assert.deepEqual(bounded!.invalid, ["prompt_tokens", "completion_tokens"]);
      const after = await getUsage(gw.kv, keyId);
      assert.equal(after.requests, before.requests + 1n);
      // The estimate stands in: the prompt's estimate and the delivered text's tokens.
      assert.equal(
        after.completion_tokens - before.completion_tokens,
        BigInt(countText("hello there", "o200k_base")),
      );
    }
    assert.equal((await ownKey(gw)).reserved, "0", "a reservation is still held");
    assert.ok(gw.logs.some((l) => l.msg === "upstream usage bounded"));
  });
});

Deno.test("usage: a whole answer's usage that is not a count bills the estimate and says so", async () => {
  await withGateway(() => {}, 100, async (gw, up) => {
    const keyId = await keyIdOf(gw);
    up.set(() => wholeWithUsage(`{"prompt_tokens":"7","completion_tokens":-1}`));
    const r = await chat(gw, { max_tokens: 10 });
    assert.equal(r.status, 200, r.text);
    const receipt = await waitForReceipt(gw.url, r.receiptId!, gw.apiKey);
    const ev = eventsOf(receipt).find((e) => e.type === "usage.bounded")!;
    assert.deepEqual(ev.invalid, ["prompt_tokens", "completion_tokens"]);
    // The reservation's own figures: the counted prompt and the output cap sent upstream.
    // The prompt is billed at its exact count, not at the byte ceiling admission reserved
    // (#27: "hi" is 7 tokens with framing, its ceiling 8).
    assert.equal(ev.prompt_tokens, countChat([{ role: "user", content: "hi" }], "o200k_base"));
    assert.equal(ev.completion_tokens, 10);
    assert.equal((await getUsage(gw.kv, keyId)).completion_tokens, 10n);
  });
});

Deno.test("usage: reported tokens are clamped to max_tokens × n and the prompt's byte ceiling (text) or the context (images), recorded in the receipt", async () => {
  await withGateway(() => {}, 100, async (gw, up) => {
    const keyId = await keyIdOf(gw);
    up.set(() => wholeWithUsage(`{"prompt_tokens":1000000000,"completion_tokens":1000000000}`));
    const r = await chat(gw, { max_tokens: 8, n: 2 });
    assert.equal(r.status, 200, r.text);
    const usage = await getUsage(gw.kv, keyId);
    assert.equal(usage.completion_tokens, 16n, "completion clamped to max_tokens × n");
    // A text prompt cannot be more tokens than its bytes (and framing): what admission
    // reserved, so a hostile upstream cannot bill past the reservation.
    const ceiling = chatTokenCeiling([{ role: "user", content: "hi" }]);
    assert.ok(ceiling < 32, `${ceiling}`);
    assert.equal(usage.prompt_tokens, BigInt(ceiling), "prompt clamped to its byte ceiling");
    const receipt = await waitForReceipt(gw.url, r.receiptId!, gw.apiKey);
    const ev = eventsOf(receipt).find((e) => e.type === "usage.bounded")!;
    assert.deepEqual(ev, {
      type: "usage.bounded",
      prompt_tokens: ceiling,
      completion_tokens: 16,
      invalid: [],
      clamped: ["prompt_tokens", "completion_tokens"],
    });
    // Billed at the clamp: 100 credits minus ceiling × 2e-7 + 16 × 8e-7.
    const spent = BigInt(ceiling) * 200n + 16n * 800n;
    assert.equal(await getBalance(gw.kv, keyId), 100_000_000_000n - spent);
    const line = gw.logs.find((l) => l.msg === "upstream usage bounded")!;
    assert.deepEqual(line.clamped, ["prompt_tokens", "completion_tokens"]);
    // With an image the upstream's count is its own to say: bounded by the context only.
    const v = await chat(gw, { max_tokens: 8, messages: VISION });
    assert.equal(v.status, 200, v.text);
    const bounded = eventsOf(await waitForReceipt(gw.url, v.receiptId!, gw.apiKey))
      .find((e) => e.type === "usage.bounded")!;
    assert.equal(bounded.prompt_tokens, 32_768, "prompt clamped to the context length");
  });
});

/** A prompt with an image part. */
const VISION = [{
  role: "user",
  content: [
    { type: "text", text: "hi" },
    { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
  ],
}];

Deno.test("usage: a cost past 2^64 nano-credits saturates; two settlements past 2^64 never wrap the ledger", async () => {
  // 1e6 credits per token: 32,768 clamped prompt tokens cost 3.3e19 nano, past 2^64.
  const huge = (
    c: GatewayConfig,
  ) => (c.models.find((m) => m.id === "demo/vision")!.pricing = { prompt: 1e6, completion: 1e6 });
  await withGateway(huge, 30_000_000, async (gw, up) => {
    const keyId = await keyIdOf(gw);
    const start = await getBalance(gw.kv, keyId);
    up.set(() => wholeWithUsage(`{"prompt_tokens":1000000000,"completion_tokens":4}`));
    // Two at once: both admitted, both settled at the saturated cost.
    // With an image, so that the prompt is bounded by the context alone.
    const rs = await Promise.all([
      chat(gw, { max_tokens: 4, messages: VISION }),
      chat(gw, { max_tokens: 4, messages: VISION }),
    ]);
    for (const r of rs) {
      assert.equal(r.status, 200, r.text);
      await waitForReceipt(gw.url, r.receiptId!, gw.apiKey);
    }
    const usage = await getUsage(gw.kv, keyId);
    assert.equal(usage.spent_nano, 2n * MAX_SETTLEMENT_NANO);
    assert.equal(await getBalance(gw.kv, keyId), start - 2n * MAX_SETTLEMENT_NANO);
  });
  // 2 credits per token (no saturation): 1e10 reported tokens would be 2e19 nano each, two of
  // them past 2^64 in the debt counter; clamped, each costs 32,768 × 2 + 2 × 2 credits.
  const two = (
    c: GatewayConfig,
  ) => (c.models.find((m) => m.id === "demo/vision")!.pricing = { prompt: 2, completion: 2 });
  // Enough credits to admit both (an image is reserved at ~765 tokens), not to pay them.
  await withGateway(two, 4_000, async (gw, up) => {
    const keyId = await keyIdOf(gw);
    up.set(() => wholeWithUsage(`{"prompt_tokens":10000000000,"completion_tokens":2}`));
    const rs = await Promise.all([
      chat(gw, { max_tokens: 2, messages: VISION }),
      chat(gw, { max_tokens: 2, messages: VISION }),
    ]);
    for (const r of rs) assert.equal(r.status, 200, r.text);
    const each = (32_768n * 2n + 2n * 2n) * 1_000_000_000n;
    assert.equal(await getBalance(gw.kv, keyId), 4_000_000_000_000n - 2n * each);
    // In debt: the next request decided against the store is refused, not admitted on a
    // wrapped counter (once the quota lease the first answers left is handed back, idle).
    await new Promise((r) => setTimeout(r, 1_500));
    const refused = await chat(gw, { max_tokens: 2 });
    assert.equal(refused.status, 403);
    assert.equal(JSON.parse(refused.text).error.type, "insufficient_credits");
  });
});

const words = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => `${tag}${i % 97} word`).join(" ");

Deno.test("disconnect: a client that leaves mid-stream is billed the delivered text of every choice, counted with the tokenizer", async () => {
  await withGateway(() => {}, 100, async (gw, up) => {
    const keyId = await keyIdOf(gw);
    const first = words(2_000, "alpha");
    const second = words(500, "beta");
    let cancelled!: () => void;
    const upstreamCancelled = new Promise<void>((r) => (cancelled = r));
    up.set(() =>
      new Response(
        new ReadableStream({
          start(c) {
            const enc = new TextEncoder();
            c.enqueue(enc.encode(chunk([{ index: 0, delta: { content: first } }])));
            c.enqueue(enc.encode(chunk([{ index: 1, delta: { content: second } }])));
            // then silence: the client leaves before any usage arrives
          },
          cancel: () => cancelled(),
        }),
        { headers: { "content-type": "text/event-stream" } },
      )
    );
    const before = await getUsage(gw.kv, keyId);
    const ctl = new AbortController();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      signal: ctl.signal,
      headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
      body: JSON.stringify({
        model: "demo/vision",
        stream: true,
        n: 2,
        max_tokens: 4000,
        messages: [{ role: "user", content: "hi" }],
      }),
    });
    assert.equal(res.status, 200);
    const receiptId = res.headers.get("x-receipt-id")!;
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let got = "";
    while (!got.includes("beta96 word")) {
      const { value, done } = await reader.read();
      assert.ok(!done, "stream ended early");
      got += value;
    }
    ctl.abort();
    await reader.cancel().catch(() => {});
    await upstreamCancelled;
    const receipt = await waitForReceipt(gw.url, receiptId, gw.apiKey);
    assert.ok(eventsOf(receipt).some((e) => e.type === "stream.client_disconnected"));
    const after = await getUsage(gw.kv, keyId);
    const expected = countText(first, "o200k_base") + countText(second, "o200k_base");
    assert.ok(expected > 2_500, `the delivered text is thousands of tokens (${expected})`);
    assert.equal(after.completion_tokens - before.completion_tokens, BigInt(expected));
  });
});

/** A raw HTTP/1.1 upstream whose answer has no length and no chunking: its end is EOF. */
function eofUpstream(payload: string) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const served = (async () => {
    for await (const conn of listener) {
      (async () => {
        const buf = new Uint8Array(65536);
        let head = "";
        let body = 0;
        let want = -1;
        while (want < 0 || body < want) {
          const n = await conn.read(buf);
          if (n === null) break;
          const text = new TextDecoder().decode(buf.subarray(0, n));
          if (want < 0) {
            head += text;
            const end = head.indexOf("\r\n\r\n");
            if (end < 0) continue;
            want = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
            body = new TextEncoder().encode(head.slice(end + 4)).byteLength;
          } else body += n;
        }
        await conn.write(
          new TextEncoder().encode(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n" +
              payload,
          ),
        );
        conn.close();
      })().catch(() => {});
    }
  })().catch(() => {});
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    async close() {
      listener.close();
      await served;
    },
  };
}

async function expectCut(gw: TestGateway) {
  const r = await chat(gw, { stream: true, max_tokens: 20 });
  assert.equal(r.status, 200);
  assert.match(r.text, /"partial answer"/, "what came was relayed");
  assert.doesNotMatch(r.text, /data: \[DONE\]/, `a cut stream must not look complete: ${r.text}`);
  assert.match(r.text, /data: \{"error":/);
  const receipt = await waitForReceipt(gw.url, r.receiptId!, gw.apiKey);
  const types = eventsOf(receipt).map((e) => e.type);
  assert.ok(types.includes("stream.upstream_failed"), JSON.stringify(types));
}

Deno.test("truncation: an OpenAI stream that ends without [DONE] is an upstream failure (chunked end, EOF framing)", async () => {
  const partial = chunk([{ index: 0, delta: { role: "assistant", content: "partial answer" } }]);
  await withGateway(() => {}, 100, async (gw, up) => {
    // A clean chunked end after a content chunk: no finish, no usage, no [DONE].
    up.set(() => sseResponse([partial]));
    await expectCut(gw);
    // The spec's upstreams that never send [DONE]: complete when the finish and usage came.
    up.set(() =>
      sseResponse([
        partial,
        chunk([{ index: 0, delta: {}, finish_reason: "stop" }]),
        chunk([], { usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }),
      ])
    );
    const ok = await chat(gw, { stream: true, max_tokens: 20 });
    assert.ok(ok.text.endsWith("data: [DONE]\n\n"), ok.text);
    const receipt = await waitForReceipt(gw.url, ok.receiptId!, gw.apiKey);
    assert.ok(!eventsOf(receipt).some((e) => String(e.type).startsWith("stream.")));
  });
  const eof = eofUpstream(partial);
  try {
    await withGateway(
      (c) => {
        c.providers.find((p) => p.name === "plain")!.base_url = eof.url;
      },
      100,
      async (gw) => await expectCut(gw),
    );
  } finally {
    await eof.close();
  }
});

Deno.test("usage: a hostile upstream's huge usage cannot take a 1-credit key below zero (20 at once, leases on)", async () => {
  const pricey = (c: GatewayConfig) => {
    c.store.quota_leases = true;
    // A request reserves ~0.02 credits; a context's worth of prompt would cost ~3.
    c.models.find((m) => m.id === "demo/echo")!.pricing = { prompt: 0.0001, completion: 0.0002 };
  };
  await withGateway(pricey, 1, async (gw, up) => {
    const keyId = await keyIdOf(gw);
    up.set(() => wholeWithUsage(`{"prompt_tokens":1000000000,"completion_tokens":1000000000}`));
    const rs = await Promise.all(
      Array.from(
        { length: 20 },
        () => chat(gw, { model: "demo/echo", max_tokens: 100, provider: { only: ["plain"] } }),
      ),
    );
    assert.ok(rs.some((r) => r.status === 200));
    for (const r of rs) assert.ok(r.status === 200 || r.status === 403, `${r.status} ${r.text}`);
    await new Promise((r) => setTimeout(r, 1_500)); // leases handed back
    const balance = await getBalance(gw.kv, keyId);
    assert.ok(balance >= 0n, `balance ${balance} nano-credits`);
  });
});

Deno.test("usage: a whole answer without usage is billed at the estimate and says so", async () => {
  await withGateway(() => {}, 100, async (gw, up) => {
    const keyId = await keyIdOf(gw);
    for (const missing of ["", `,"usage":null`, `,"usage":{}`]) {
      up.set(() =>
        new Response(
          `{"id":"chatcmpl-w","object":"chat.completion","created":1,"model":"m",` +
            `"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},` +
            `"finish_reason":"stop"}]${missing}}`,
          { headers: { "content-type": "application/json" } },
        )
      );
      const before = (await getUsage(gw.kv, keyId)).prompt_tokens;
      const r = await chat(gw, { max_tokens: 7 });
      assert.equal(r.status, 200, r.text);
      const ev = eventsOf(await waitForReceipt(gw.url, r.receiptId!, gw.apiKey))
        .find((e) => e.type === "usage.bounded")!;
      assert.deepEqual(ev.invalid, ["prompt_tokens", "completion_tokens"], missing);
      // The prompt as counted, the completion at its reservation.
      assert.equal(ev.prompt_tokens, countChat([{ role: "user", content: "hi" }], "o200k_base"));
      assert.equal(ev.completion_tokens, 7);
      assert.ok((await getUsage(gw.kv, keyId)).prompt_tokens > before, "billed, not zero");
    }
  });
});

Deno.test("an upstream answer of the wrong shape is a 502 upstream_error on every format, never a 500", async () => {
  await withGateway(() => {}, 100, async (gw, up) => {
    const json = (body: string) => () =>
      new Response(body, { headers: { "content-type": "application/json" } });
    const shapes = [
      "null",
      "[]",
      '"hello"',
      "42",
      '{"choices":null}',
      '{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":7}}]}',
      '{"choices":[{"message":{"role":"assistant","tool_calls":[null]}}]}',
    ];
    const routes: [string, Record<string, unknown>][] = [
      ["/v1/chat/completions", {
        model: "demo/vision",
        messages: [{ role: "user", content: "hi" }],
      }],
      ["/v1/messages", {
        model: "demo/vision",
        max_tokens: 8,
        messages: [{ role: "user", content: "hi" }],
      }],
      ["/v1/responses", { model: "demo/vision", input: "hi" }],
    ];
    for (const body of shapes) {
      up.set(json(body));
      for (const [path, req] of routes) {
        const res = await fetch(`${gw.url}${path}`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            authorization: `Bearer ${gw.apiKey}`,
            "anthropic-version": "2023-06-01",
          },
          body: JSON.stringify(req),
        });
        const text = await res.text();
        assert.ok(res.status !== 500, `${path} ${body}: ${res.status} ${text}`);
        if (body.startsWith("{") && path === "/v1/chat/completions") continue; // relayed as is
        assert.equal(res.status, 502, `${path} ${body}: ${text}`);
      }
    }
    assert.ok(!gw.logs.some((l) => l.level === "error"), "no internal error logged");
  });
});

Deno.test("usage: a stream's usage.cost shown to the client is the cost billed, not the upstream's claim", async () => {
  await withGateway(() => {}, 100, async (gw, up) => {
    const keyId = await keyIdOf(gw);
    up.set(() =>
      sseResponse([
        chunk([{ index: 0, delta: { role: "assistant", content: "hello there" } }]),
        chunk([{ index: 0, delta: {}, finish_reason: "stop" }]),
        `data: {"id":"chatcmpl-x","object":"chat.completion.chunk","choices":[],` +
        `"usage":{"prompt_tokens":1000000000,"completion_tokens":1000000000}}\n\n`,
        "data: [DONE]\n\n",
      ])
    );
    const before = (await getUsage(gw.kv, keyId)).spent_nano;
    const r = await chat(gw, {
      stream: true,
      max_tokens: 50,
      stream_options: { include_usage: true },
    });
    assert.equal(r.status, 200, r.text);
    await waitForReceipt(gw.url, r.receiptId!, gw.apiKey);
    const spent = (await getUsage(gw.kv, keyId)).spent_nano - before;
    const shown = r.text.split("\n").filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6))).find((c) => c.usage)!.usage;
    assert.equal(Math.round(shown.cost * 1e9), Number(spent), JSON.stringify(shown));
  });
});
