/**
 * Gateway core end to end: the official openai SDK against the real gateway
 * on a loopback port, in front of real demo upstream servers.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import type { GatewayConfig } from "../src/config/schema.ts";

async function withGateway(
  fn: (gw: TestGateway, client: OpenAI) => Promise<void>,
  opts: Parameters<typeof startTestGateway>[0] = {},
) {
  const gw = await startTestGateway(opts);
  try {
    await fn(gw, new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 }));
  } finally {
    await gw.close();
  }
}

async function rawPost(
  gw: TestGateway,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${gw.url}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${gw.apiKey}`,
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, json: await res.json() };
}

Deno.test("tool calls, non-streamed and streamed", async () => {
  await withGateway(async (_gw, client) => {
    const tools: OpenAI.Chat.ChatCompletionTool[] = [{
      type: "function",
      function: {
        name: "lookup",
        description: "look something up",
        parameters: { type: "object" },
      },
    }];
    const res = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "please call lookup for cats" }],
      tools,
      tool_choice: "required",
    });
    assert.equal(res.choices[0].finish_reason, "tool_calls");
    const call = res.choices[0].message.tool_calls?.[0];
    assert.ok(call && call.type === "function");
    assert.equal(call.function.name, "lookup");
    assert.doesNotThrow(() => JSON.parse(call.function.arguments));

    const stream = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "please call lookup for dogs" }],
      tools,
      tool_choice: "required",
      stream: true,
    });
    let name = "";
    let args = "";
    let finish: string | null = null;
    for await (const c of stream) {
      const tc = c.choices[0]?.delta?.tool_calls?.[0];
      if (tc?.function?.name) name += tc.function.name;
      if (tc?.function?.arguments) args += tc.function.arguments;
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(name, "lookup");
    assert.equal(finish, "tool_calls");
    assert.equal(typeof JSON.parse(args), "object");

    // A tool result round trip.
    const follow = await client.chat.completions.create({
      model: "demo/echo",
      messages: [
        { role: "user", content: "please call lookup for cats" },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "cats are great" },
      ],
      tools,
    });
    assert.match(follow.choices[0].message.content ?? "", /cats are great/);
  });
});

Deno.test("legacy completions, streamed and not", async () => {
  await withGateway(async (_gw, client) => {
    const res = await client.completions.create({
      model: "demo/echo",
      prompt: "once upon a time",
      max_tokens: 50,
    });
    assert.equal(res.object, "text_completion");
    assert.equal(res.model, "demo/echo");
    assert.ok(res.choices[0].text.length > 0);
    assert.ok(res.usage && res.usage.total_tokens > 0);
    const stream = await client.completions.create({
      model: "demo/echo",
      prompt: "stream a story",
      stream: true,
    });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.text ?? "";
    assert.equal(text, res.choices[0].text.replace("once upon a time", "stream a story"));
  });
});

Deno.test("embeddings: floats and base64 decode to the same vectors, in input order", async () => {
  await withGateway(async (_gw, client) => {
    const input = ["alpha", "beta", "gamma"];
    const f = await client.embeddings.create({
      model: "demo/embed-large",
      input,
      dimensions: 256,
      encoding_format: "float",
    });
    assert.equal(f.data.length, 3);
    f.data.forEach((d, i) => {
      assert.equal(d.index, i);
      assert.equal(d.embedding.length, 256);
    });
    // The raw base64 form: little-endian packed float32.
    const res = await fetch(`${_gw.baseURL}/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${_gw.apiKey}` },
      body: JSON.stringify({
        model: "demo/embed-large",
        input,
        dimensions: 256,
        encoding_format: "base64",
      }),
    });
    const b = await res.json();
    b.data.forEach((d: { embedding: string; index: number }, i: number) => {
      const bytes = Uint8Array.from(atob(d.embedding), (ch) => ch.charCodeAt(0));
      const view = new DataView(bytes.buffer);
      const floats = Array.from(
        { length: bytes.length / 4 },
        (_, k) => view.getFloat32(k * 4, true),
      );
      assert.equal(floats.length, 256);
      floats.forEach((x, k) => assert.ok(Math.abs(x - f.data[i].embedding[k]) < 1e-6));
    });
    // The SDK's own base64 path decodes to the same numbers.
    const viaSdk = await client.embeddings.create({
      model: "demo/embed-large",
      input,
      dimensions: 256,
    });
    assert.deepEqual(viaSdk.data.map((d) => d.embedding.length), [256, 256, 256]);
  });
});

Deno.test("authentication errors are 401 invalid_api_key", async () => {
  await withGateway(async (gw) => {
    for (
      const key of [
        "",
        "not-a-key",
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
        "cgw-unknownunknownunknownunknownunknownunkn",
      ]
    ) {
      const client = new OpenAI({ baseURL: gw.baseURL, apiKey: key || "x", maxRetries: 0 });
      await assert.rejects(
        client.chat.completions.create({
          model: "demo/echo",
          messages: [{ role: "user", content: "hi" }],
        }),
        (e: unknown) => {
          assert.ok(e instanceof OpenAI.AuthenticationError);
          assert.equal(e.status, 401);
          assert.equal(e.code, "invalid_api_key");
          assert.equal(e.type, "invalid_request_error");
          return true;
        },
      );
    }
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(res.status, 401);
    assert.equal((await res.json()).error.code, "invalid_api_key");
  });
});

Deno.test("no credits → 403 before anything is sent upstream", async () => {
  await withGateway(async (gw) => {
    const poor = await gw.newKey({ credits: 0 });
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: poor, maxRetries: 0 });
    const before = gw.plain.stats.total + gw.secure.stats.total;
    await assert.rejects(
      client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "hi" }],
      }),
      (e: unknown) => e instanceof OpenAI.PermissionDeniedError && e.status === 403,
    );
    assert.equal(gw.plain.stats.total + gw.secure.stats.total, before);
  });
});

Deno.test("rate limit → 429 with Retry-After and X-RateLimit headers", async () => {
  await withGateway(async (gw) => {
    const key = await gw.newKey({ tier: "enterprise", rpm: 3, tpm: 1_000_000 });
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: key, maxRetries: 0 });
    const ask = () =>
      client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "hi" }],
      });
    for (let i = 0; i < 3; i++) await ask();
    await assert.rejects(ask(), (e: unknown) => {
      assert.ok(e instanceof OpenAI.RateLimitError);
      assert.ok(Number(e.headers?.get("retry-after")) >= 1);
      assert.equal(e.headers?.get("x-ratelimit-limit"), "3");
      assert.equal(e.headers?.get("x-ratelimit-remaining"), "0");
      assert.ok(e.headers?.get("x-ratelimit-reset"));
      return true;
    });
  });
});

Deno.test("validation errors name the parameter (400)", async () => {
  await withGateway(async (gw, client) => {
    const m = [{ role: "user", content: "hi" }];
    const cases: [string, Record<string, unknown>, string][] = [
      ["/v1/chat/completions", { messages: m }, "model"],
      ["/v1/chat/completions", { model: "demo/echo" }, "messages"],
      [
        "/v1/chat/completions",
        { model: "demo/echo", messages: [{ role: "wizard", content: "x" }] },
        "messages[0].role",
      ],
      ["/v1/chat/completions", {
        model: "demo/echo",
        messages: [{ role: "user", content: [{ type: "audio" }] }],
      }, "messages[0].content[0].type"],
      [
        "/v1/chat/completions",
        { model: "demo/echo", messages: m, temperature: 2.5 },
        "temperature",
      ],
      ["/v1/chat/completions", { model: "demo/echo", messages: m, top_p: 1.5 }, "top_p"],
      [
        "/v1/chat/completions",
        { model: "demo/echo", messages: m, presence_penalty: -3 },
        "presence_penalty",
      ],
      [
        "/v1/chat/completions",
        { model: "demo/echo", messages: m, frequency_penalty: 2.1 },
        "frequency_penalty",
      ],
      ["/v1/chat/completions", { model: "demo/echo", messages: m, n: 0 }, "n"],
      // Either token parameter is renamed to the model's; two that disagree name the other one.
      [
        "/v1/chat/completions",
        { model: "demo/echo-next", messages: m, max_tokens: 10, max_completion_tokens: 20 },
        "max_tokens",
      ],
      [
        "/v1/chat/completions",
        { model: "demo/echo", messages: m, max_completion_tokens: 10, max_tokens: 20 },
        "max_completion_tokens",
      ],
      [
        "/v1/chat/completions",
        {
          model: "demo/echo",
          messages: [{
            role: "user",
            content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }],
          }],
        },
        "messages[0].content[0]",
      ],
      ["/v1/embeddings", { model: "demo/embed-large", input: Array(2049).fill("x") }, "input"],
      ["/v1/embeddings", { model: "demo/embed-small", input: "x", dimensions: 64 }, "dimensions"],
      ["/v1/embeddings", { model: "demo/embed-large", input: "x", dimensions: 4000 }, "dimensions"],
      [
        "/v1/embeddings",
        { model: "demo/embed-large", input: "x", encoding_format: "hex" },
        "encoding_format",
      ],
      ["/v1/completions", { model: "demo/echo", prompt: "x", temperature: -1 }, "temperature"],
    ];
    for (const [path, body, param] of cases) {
      const r = await rawPost(gw, path, body);
      assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 80)} → ${r.status}`);
      assert.equal(r.json.error.type, "invalid_request_error");
      assert.equal(r.json.error.param, param, `param for ${JSON.stringify(body).slice(0, 80)}`);
      assert.ok(r.headers.get("x-receipt-id")?.startsWith("rcpt-"));
    }
    // The SDK's class and the unknown model's 404.
    await assert.rejects(
      client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "x" }],
        temperature: 3,
      }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && (e.param === "temperature"),
    );
    await assert.rejects(
      client.chat.completions.create({
        model: "demo/nope",
        messages: [{ role: "user", content: "x" }],
      }),
      (e: unknown) => e instanceof OpenAI.NotFoundError && e.status === 404,
    );
    const a = gw.plain.stats.total + gw.secure.stats.total;
    assert.equal(a, 0, "no invalid request reached an upstream");
  });
});

// Nothing verified, and the confidential demo upstream opted out of failing closed
// (`allow_unverified`), so the zdr routing below can be exercised without a verifier.
const unverified = {
  verification: "off" as const,
  configure: (c: GatewayConfig) => {
    c.providers.find((p) => p.name === "secure")!.confidential!.allow_unverified = true;
  },
};

Deno.test("the image model accepts images; the max_completion_tokens model accepts its parameter", async () => {
  await withGateway(async (_gw, client) => {
    const r = await client.chat.completions.create({
      model: "demo/vision",
      messages: [{
        role: "user",
        content: [{ type: "text", text: "what is this" }, {
          type: "image_url",
          image_url: { url: "data:image/png;base64,AAAA" },
        }],
      }],
    });
    assert.match(r.choices[0].message.content ?? "", /image/);
    const n = await client.chat.completions.create({
      model: "demo/echo-next",
      messages: [{ role: "user", content: "one two three four five six" }],
      max_completion_tokens: 3,
    });
    assert.equal(n.choices[0].finish_reason, "length");
  });
});

Deno.test("provider block: zdr routing, aci constraints fail closed, validation", async () => {
  // Nothing is verified in this gateway (no verifier), so attestation constraints must fail closed.
  await withGateway(async (gw, client) => {
    const m = [{ role: "user", content: "secret prompt" }];
    // zdr: only the ZDR provider is used, also when it fails and the other is healthy.
    gw.plain.resetStats();
    gw.secure.resetStats();
    for (let i = 0; i < 3; i++) {
      const r = await rawPost(gw, "/v1/chat/completions", {
        model: "demo/echo",
        messages: m,
        provider: { zdr: true },
      });
      assert.equal(r.status, 200);
    }
    assert.equal(gw.plain.stats.total, 0);
    assert.equal(gw.secure.stats.total, 3);
    assert.equal(
      (gw.secure.stats.lastBody as Record<string, unknown>).provider,
      undefined,
      "provider block stripped",
    );
    gw.secure.setFault({ kind: "status", status: 500 });
    const failed = await rawPost(gw, "/v1/chat/completions", {
      model: "demo/echo",
      messages: m,
      provider: { zdr: true },
    });
    assert.ok(failed.status >= 500);
    assert.equal(gw.plain.stats.total, 0, "zdr never fails over to a non-ZDR provider");
    // Without zdr the same failure fails over to the healthy provider.
    const over = await rawPost(gw, "/v1/chat/completions", { model: "demo/echo", messages: m });
    assert.equal(over.status, 200);
    assert.equal(gw.plain.stats.total, 1);
    gw.secure.setFault(null);

    // A model with no ZDR provider → 404 before anything is sent.
    gw.plain.resetStats();
    await assert.rejects(
      client.chat.completions.create({
        model: "demo/vision",
        messages: [{ role: "user", content: "x" }],
        // @ts-expect-error: the gateway's routing block
        provider: { zdr: true },
      }),
      (e: unknown) => e instanceof OpenAI.NotFoundError,
    );
    assert.equal(gw.plain.stats.total, 0);

    // aci_verified cannot be met (nothing is verified): 503, fail closed, also with the waiver header.
    gw.plain.resetStats();
    gw.secure.resetStats();
    for (const headers of [{}, { "x-upstream-verification": "none" }] as Record<string, string>[]) {
      const r = await rawPost(gw, "/v1/chat/completions", {
        model: "demo/echo",
        messages: m,
        provider: { aci_verified: true },
      }, headers);
      assert.equal(r.status, 503);
      assert.equal(r.json.error.type, "upstream_verification_failed");
    }
    const s = await rawPost(gw, "/v1/chat/completions", {
      model: "demo/echo",
      messages: m,
      provider: { aci_session_ids: ["a".repeat(64)] },
    });
    assert.equal(s.status, 503);
    assert.equal(s.json.error.type, "session_not_accepted");
    // Strings that are not session ids match no channel: the same 503, not a 400 (spec).
    for (const ids of [["A".repeat(64)], ["abc"], ["a".repeat(64), "not-hex"]]) {
      const x = await rawPost(gw, "/v1/chat/completions", {
        model: "demo/echo",
        messages: m,
        provider: { aci_session_ids: ids },
      });
      assert.equal(x.status, 503, JSON.stringify(ids));
      assert.equal(x.json.error.code, "session_not_accepted");
    }
    assert.equal(gw.plain.stats.total + gw.secure.stats.total, 0);

    const bad: [unknown, string][] = [
      [{ aci_session_ids: ["a".repeat(64)], aci_verified: false }, "provider.aci_session_ids"],
      [{ aci_session_ids: [] }, "provider.aci_session_ids"],
      [{ aci_session_ids: [7] }, "provider.aci_session_ids[0]"],
      [{ aci_whatever: true }, "provider.aci_whatever"],
      [{ zdr: "yes" }, "provider.zdr"],
    ];
    for (const [provider, param] of bad) {
      for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]) {
        const body = path === "/v1/embeddings"
          ? { model: "demo/embed-large", input: "x", provider }
          : path === "/v1/completions"
          ? { model: "demo/echo", prompt: "x", provider }
          : { model: "demo/echo", messages: m, provider };
        const r = await rawPost(gw, path, body);
        assert.equal(r.status, 400, `${path} ${JSON.stringify(provider)}`);
        assert.equal(r.json.error.param, param);
      }
    }
  }, unverified);
});

Deno.test("routing headers: forced provider, trace id, metadata", async () => {
  await withGateway(async (gw) => {
    const m = [{ role: "user", content: "hello" }];
    gw.plain.resetStats();
    const r = await rawPost(gw, "/v1/chat/completions", { model: "demo/echo", messages: m }, {
      "x-service-provider": "plain",
      "x-service-trace-id": "trace-123",
      "x-service-metadata": JSON.stringify({ team: "a" }),
    });
    assert.equal(r.status, 200);
    assert.equal(gw.plain.stats.total, 1);
    assert.equal(r.headers.get("x-service-trace-id"), "trace-123");
    const line = gw.logs.find((l) => l.trace_id === "trace-123");
    assert.ok(line);
    assert.deepEqual(line.metadata, { team: "a" });
    assert.equal(line.provider, "plain");

    const forcedNonZdr = await rawPost(gw, "/v1/chat/completions", {
      model: "demo/echo",
      messages: m,
      provider: { zdr: true },
    }, {
      "x-service-provider": "plain",
    });
    assert.equal(forcedNonZdr.status, 404, "constraints still apply to a forced provider");
    const unknown = await rawPost(gw, "/v1/chat/completions", { model: "demo/echo", messages: m }, {
      "x-service-provider": "nope",
    });
    assert.equal(unknown.status, 400);
    const notServing = await rawPost(gw, "/v1/chat/completions", {
      model: "demo/vision",
      messages: m,
    }, { "x-service-provider": "secure" });
    assert.equal(notServing.status, 404);
    const meta = await rawPost(gw, "/v1/chat/completions", { model: "demo/echo", messages: m }, {
      "x-service-metadata": "[1,2]",
    });
    assert.equal(meta.status, 400);
    assert.equal(meta.json.error.param, "x-service-metadata");
    const waived = await rawPost(gw, "/v1/chat/completions", { model: "demo/echo", messages: m }, {
      "x-upstream-verification": "none",
    });
    assert.equal(waived.status, 200);
  });
});

Deno.test("HTTP errors: 404 path, 405 method, malformed JSON, 413, envelope everywhere", async () => {
  await withGateway(async (gw) => {
    const notFound = await fetch(`${gw.url}/v1/nope`);
    assert.equal(notFound.status, 404);
    assert.ok((await notFound.json()).error.message);
    const wrong = await fetch(`${gw.baseURL}/chat/completions`, { method: "GET" });
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get("allow"), "POST");
    await wrong.body?.cancel();
    const malformed = await rawPost(gw, "/v1/chat/completions", "{not json");
    assert.equal(malformed.status, 400);
    const big = await rawPost(gw, "/v1/chat/completions", {
      model: "demo/echo",
      messages: [{ role: "user", content: "x".repeat(5 * 1024 * 1024) }],
    });
    assert.equal(big.status, 413);
    assert.equal(big.json.error.code, "payload_too_large");
    const dup = await rawPost(
      gw,
      "/v1/chat/completions",
      '{"model":"demo/echo","model":"demo/vision","messages":[]}',
    );
    assert.equal(dup.status, 400);
    for (const r of [notFound]) assert.equal(r.headers.get("x-aci-version"), "aci/1");
  });
});

Deno.test("catalog: fields, filters, 400 on any value but true", async () => {
  await withGateway(async (gw, client) => {
    const all = await client.models.list();
    const ids = all.data.map((m) => m.id);
    assert.ok(ids.includes("demo/echo") && ids.includes("demo/echo-latest"));
    const echo = (await (await fetch(`${gw.baseURL}/models`)).json()).data.find((
      m: { id: string },
    ) => m.id === "demo/echo");
    for (
      const f of [
        "id",
        "name",
        "is_tee",
        "created",
        "context_length",
        "max_output_length",
        "input_modalities",
        "output_modalities",
        "pricing",
        "supported_parameters",
        "supported_features",
        "providers",
      ]
    ) {
      assert.ok(f in echo, `model object has ${f}`);
    }
    assert.equal("zdr" in echo, false);
    assert.equal(echo.is_tee, true);
    assert.deepEqual(echo.providers, ["secure"]);
    const alias = (await (await fetch(`${gw.baseURL}/models`)).json()).data.find((
      m: { id: string },
    ) => m.id === "demo/echo-latest");
    assert.equal(alias.is_tee, echo.is_tee);

    const get = async (q: string) => {
      const r = await fetch(`${gw.baseURL}/models${q}`);
      return { status: r.status, json: await r.json() };
    };
    const tee = await get("?tee=true");
    assert.ok(tee.json.data.every((m: { is_tee: boolean }) => m.is_tee));
    assert.ok(!tee.json.data.some((m: { id: string }) => m.id === "demo/vision"));
    const zdr = await get("?zdr=true");
    assert.deepEqual(zdr.json.data.map((m: { id: string }) => m.id).sort(), [
      "demo/echo",
      "demo/echo-latest",
      "demo/private",
    ]);
    const both = await get("?zdr=true&tee=true");
    assert.equal(both.json.data.length, 3);
    for (const q of ["?zdr=false", "?tee=false", "?zdr=1", "?tee=", "?zdr=true&zdr=true"]) {
      const r = await get(q);
      assert.equal(r.status, 400, q);
      assert.equal(r.json.error.type, "invalid_request_error");
      assert.match(r.json.error.message, /only accepted value is 'true'/);
    }
    const emb = await (await fetch(`${gw.baseURL}/embeddings/models?zdr=true`)).json();
    assert.deepEqual(emb.data.map((m: { id: string }) => m.id), ["demo/embed-large"]);
    assert.equal((await fetch(`${gw.baseURL}/embeddings/models?tee=no`)).status, 400);
    const vendor = await (await fetch(`${gw.baseURL}/models/demo-tee`)).json();
    assert.ok(vendor.data.every((m: { is_tee: boolean }) => m.is_tee));
    assert.equal((await fetch(`${gw.baseURL}/models/unknown-vendor`)).status, 404);
    const one = await client.models.retrieve("demo/echo");
    assert.equal(one.id, "demo/echo");
  });
});

Deno.test("credits are debited by real usage; logs carry no prompt", async () => {
  await withGateway(async (gw, client) => {
    const { getBalance, getUsage } = await import("../src/admission/credits.ts");
    const { readKeyFigures } = await import("../src/admission/key_figures.ts");
    const { DEFAULT_TIERS } = await import("../src/admission/rate_limit.ts");
    const { authenticate } = await import("../src/keys/keys.ts");
    const rec = await authenticate(gw.kv, `Bearer ${gw.apiKey}`);
    const before = await getBalance(gw.kv, rec.key_id);
    const res = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "very secret words here" }],
    });
    const u = res.usage!;
    const expected = BigInt(
      Math.ceil(u.prompt_tokens * 0.0000002 * 1e9 + u.completion_tokens * 0.0000008 * 1e9 - 1e-6),
    );
    // At once, the balance is down by exactly the actual cost; a quota lease's
    // slice, if one is still held, is reserved, not spent (admission/key_figures.ts).
    const f = await readKeyFigures(gw.kv, rec, DEFAULT_TIERS, Date.now());
    assert.equal(before - f.balance, expected);
    assert.equal(f.balance - f.reserved, f.available);
    const usage = await getUsage(gw.kv, rec.key_id);
    assert.equal(usage.prompt_tokens, BigInt(u.prompt_tokens));
    assert.ok(!JSON.stringify(gw.logs).includes("secret words"));
    assert.ok(!JSON.stringify(gw.logs).includes(gw.apiKey));
  });
});
