/**
 * Routing and receipts in production (#20 items 2, 3, 4, 6, 8, 12; #15 item 6
 * and the same-401 rule): the real gateway on loopback, real demo upstreams,
 * the real SDKs. Each test reproduces a behaviour found wrong before the fix.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import {
  asRecord,
  events,
  fetchReceipt,
  fetchReport,
  type Json,
  postRaw,
} from "./support/receipt_check.ts";
import { verifyReceipt } from "../src/verify/receipt.ts";
import { revokeKey } from "../src/keys/keys.ts";
import { keyDigest } from "../src/keys/keys.ts";
import type { GatewayConfig } from "../src/config/schema.ts";
import type { ErrorEnvelope } from "./support/wire.ts";

const m = [{ role: "user", content: "the secret prompt text" }];

async function receiptOf(gw: TestGateway, id: string | null, key = gw.apiKey): Promise<Json> {
  assert.ok(id, "x-receipt-id present");
  const r = await fetchReceipt(gw.url, id, key);
  assert.equal(r.status, 200, `receipt ${id}`);
  return asRecord(r.body);
}

function json(bytes: Uint8Array): Json {
  return asRecord(JSON.parse(new TextDecoder().decode(bytes)));
}

/** The error of an OpenAI- or Anthropic-format error answer. */
function errorOf(bytes: Uint8Array): ErrorEnvelope["error"] {
  const e = json(bytes).error;
  assert.ok(e && typeof e === "object", "an error envelope");
  return e as ErrorEnvelope["error"];
}

Deno.test("allow_unverified: an operator's explicit opt-out serves while unverified, warned at start-up and on every use", async () => {
  const gw = await startTestGateway({
    verification: "off",
    configure: (c) => {
      c.providers.find((p) => p.name === "secure")!.confidential!.allow_unverified = true;
    },
  });
  try {
    const startup = gw.logs.filter((l) =>
      l.level === "warn" && String(l.msg).includes("allow_unverified") && l.upstream === "secure"
    );
    assert.equal(startup.length, 1, "warned once at start-up");
    for (let i = 0; i < 2; i++) {
      const r = await postRaw(gw.url, "/v1/chat/completions", {
        model: "demo/private",
        messages: m,
      }, gw.apiKey);
      assert.equal(r.status, 200);
      const receipt = await receiptOf(gw, r.receiptId);
      const v = events(receipt).find((e) => e.type === "upstream.verified")!;
      assert.equal(v.result, "failed", "the receipt says the upstream was not verified");
    }
    const uses = gw.logs.filter((l) =>
      l.level === "warn" && String(l.msg).includes("unverified confidential upstream")
    );
    assert.equal(uses.length, 2, "warned on every use");
    // aci_verified is never relaxed by the opt-out.
    const r = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/private",
      messages: m,
      provider: { aci_verified: true },
    }, gw.apiKey);
    assert.equal(r.status, 503);
  } finally {
    await gw.close();
  }
});

Deno.test("aci_verified needs a hardware_proven session: a dev session without the development switch serves only unconstrained requests", async () => {
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.find((p) => p.name === "secure")!.confidential!.dev_counts_for_aci_verified =
        false;
    },
  });
  try {
    assert.equal(gw.gateway.ctx.verification("secure")?.verified, true);
    const refused = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/private",
      messages: m,
      provider: { aci_verified: true },
    }, gw.apiKey);
    assert.equal(refused.status, 503);
    assert.match(errorOf(refused.response).message, /hardware_proven/);
    assert.equal(gw.secure.stats.total, 0, "no prompt for a session without hardware evidence");
    const sessionId = (gw.gateway.ctx.verification("secure") as { sessionId: string }).sessionId;
    const pinned = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/private",
      messages: m,
      provider: { aci_session_ids: [sessionId] },
    }, gw.apiKey);
    assert.equal(pinned.status, 503);
    assert.equal(errorOf(pinned.response).code, "session_not_accepted");

    const served = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/private",
      messages: m,
    }, gw.apiKey);
    assert.equal(served.status, 200);
    const v = events(await receiptOf(gw, served.receiptId)).find((e) =>
      e.type === "upstream.verified"
    )!;
    assert.equal(v.result, "verified");
    assert.equal(v.tee_attested, "not_hardware_proven", "the receipt shows which kind of session");
  } finally {
    await gw.close();
  }
});

Deno.test("development switch: the dev session counts for aci_verified, and its claims and the receipt say so", async () => {
  const gw = await startTestGateway();
  try {
    const r = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/private",
      messages: m,
      provider: { aci_verified: true },
    }, gw.apiKey);
    assert.equal(r.status, 200);
    const v = events(await receiptOf(gw, r.receiptId)).find((e) => e.type === "upstream.verified")!;
    assert.equal(v.tee_attested, "development_switch");
    const doc = asRecord(
      await (await fetch(`${gw.url}/v1/aci/sessions/${v.session_id}`, {
        headers: { authorization: `Bearer ${gw.apiKey}` },
      })).json(),
    );
    const claims = asRecord(doc.claims);
    assert.equal(asRecord(claims.tee_attested).status, "refuted");
    const sw = asRecord(asRecord(claims.extra).aci_verified_by_development_switch);
    assert.match(String(sw.reason), /dev_counts_for_aci_verified/);
  } finally {
    await gw.close();
  }
});

Deno.test("failover from a verified confidential attempt: every upstream.verified names its attempt, the served attempt is named, the verifier is not fooled", async () => {
  const gw = await startTestGateway();
  try {
    gw.secure.setFault({ kind: "status", status: 500 });
    const r = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/echo",
      messages: m,
    }, gw.apiKey);
    assert.equal(r.status, 200);
    assert.equal(gw.plain.stats.total, 1, "answered by the plain provider");
    const receipt = await receiptOf(gw, r.receiptId);
    const evs = events(receipt);
    const selected = evs.filter((e) => e.type === "route.selected");
    assert.deepEqual(selected.map((e) => [e.target_route_id, e.attempt]), [
      ["secure:demo-chat", 1],
      ["plain:demo-chat", 2],
    ]);
    const verified = evs.filter((e) => e.type === "upstream.verified");
    assert.equal(verified.length, 1);
    assert.equal(verified[0].attempt, 1, "the verification belongs to the failed attempt");
    const served = evs.filter((e) => e.type === "route.served");
    assert.deepEqual(served.map((e) => [e.target_route_id, e.attempt]), [["plain:demo-chat", 2]]);
    // A verifier demanding a verified upstream must refuse this receipt (it passed before).
    const { report } = await fetchReport(gw.url);
    const strict = verifyReceipt(receipt, {
      report,
      requestBody: r.request,
      responseBody: r.response,
      requireVerifiedUpstream: true,
    });
    assert.equal(strict.find((c) => c.name === "receipt.upstream_verified")?.ok, false);
    const lax = verifyReceipt(receipt, {
      report,
      requestBody: r.request,
      responseBody: r.response,
    });
    assert.deepEqual(lax.filter((c) => !c.ok), []);
  } finally {
    await gw.close();
  }
});

Deno.test("every inference refusal after authentication carries x-receipt-id: 413, 415, bad trace id, bad metadata", async () => {
  const gw = await startTestGateway({
    configure: (c) => {
      c.limits.max_body_bytes = 4096;
    },
  });
  try {
    const { report } = await fetchReport(gw.url);
    const body = { model: "demo/echo", messages: m };
    const cases: [string, () => Promise<Response>, number][] = [
      ["413", () =>
        fetch(`${gw.baseURL}/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
          body: JSON.stringify({ ...body, pad: "x".repeat(10_000) }),
        }), 413],
      ["415", () =>
        fetch(`${gw.baseURL}/chat/completions`, {
          method: "POST",
          headers: { "content-type": "text/plain", authorization: `Bearer ${gw.apiKey}` },
          body: JSON.stringify(body),
        }), 415],
      ["trace id", () =>
        fetch(`${gw.baseURL}/chat/completions`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            authorization: `Bearer ${gw.apiKey}`,
            "x-service-trace-id": "bad trace id with spaces",
          },
          body: JSON.stringify(body),
        }), 400],
      ["metadata", () =>
        fetch(`${gw.baseURL}/messages`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-api-key": gw.apiKey,
            "x-service-metadata": "[1,2]",
          },
          body: JSON.stringify({ ...body, max_tokens: 5 }),
        }), 400],
    ];
    for (const [name, send, status] of cases) {
      const res = await send();
      const bytes = new Uint8Array(await res.arrayBuffer());
      assert.equal(res.status, status, name);
      const receipt = await receiptOf(gw, res.headers.get("x-receipt-id"));
      assert.ok(!events(receipt).some((e) => e.type === "request.forwarded"), name);
      const checks = verifyReceipt(receipt, { report, responseBody: bytes });
      assert.deepEqual(checks.filter((c) => !c.ok), [], name);
    }
    assert.equal(gw.plain.stats.total + gw.secure.stats.total, 0);
    // Before authentication nothing is stored: no receipt id.
    const anon = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: "x",
    });
    await anon.body?.cancel();
    assert.equal(anon.status, 401);
    assert.equal(anon.headers.get("x-receipt-id"), null);
  } finally {
    await gw.close();
  }
});

Deno.test("request log lines: key id, receipt id, error code, attempts with reasons; no bodies; /healthz not logged", async () => {
  const gw = await startTestGateway();
  try {
    gw.secure.setFault({ kind: "status", status: 500 });
    gw.plain.setFault({ kind: "status", status: 502 });
    const r = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/echo",
      messages: m,
    }, gw.apiKey);
    assert.equal(r.status, 502);
    const line = gw.logs.find((l) => l.receipt_id === r.receiptId)!;
    assert.ok(line, "a log line names the receipt");
    const keyId = (await gw.gateway.ctx.auth.authenticate(`Bearer ${gw.apiKey}`)).key_id;
    assert.equal(line.key_id, keyId);
    assert.equal(line.error_code, "upstream_error");
    assert.equal(line.status, 502);
    assert.deepEqual(line.attempts, [
      { provider: "secure", outcome: "status_500" },
      { provider: "plain", outcome: "status_502" },
    ]);
    gw.secure.setFault(null);
    gw.plain.setFault(null);
    const ok = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/echo",
      messages: m,
    }, gw.apiKey);
    const okLine = gw.logs.find((l) => l.receipt_id === ok.receiptId)!;
    assert.deepEqual(okLine.attempts, [{ provider: "secure", outcome: "served" }]);
    assert.equal(okLine.error_code, null);
    const before = gw.logs.length;
    for (let i = 0; i < 3; i++) await (await fetch(`${gw.url}/healthz`)).body?.cancel();
    assert.equal(gw.logs.length, before, "health polls are not logged as requests");
    const all = JSON.stringify(gw.logs);
    assert.ok(!all.includes("secret prompt"), "no prompt in any log line");
    assert.ok(!all.includes(gw.apiKey), "no key in any log line");
  } finally {
    await gw.close();
  }
});

Deno.test("provider block: unknown members are 400 naming them; OpenRouter preferences have real semantics or a 400", async () => {
  const gw = await startTestGateway();
  try {
    const post = (provider: unknown, model = "demo/echo") =>
      postRaw(gw.url, "/v1/chat/completions", { model, messages: m, provider }, gw.apiKey);
    for (const member of ["Zdr", "ZDR", "ACI_VERIFIED", "zdr_required"]) {
      const r = await post({ [member]: true });
      assert.equal(r.status, 400, member);
      const err = asRecord(json(r.response).error);
      assert.equal(err.param, `provider.${member}`);
      assert.match(String(err.message), new RegExp(`provider\\.${member}`));
    }
    for (const member of ["sort", "quantizations", "require_parameters", "max_price"]) {
      const r = await post({ [member]: member === "sort" ? "price" : true });
      assert.equal(r.status, 400, member);
      assert.match(String(asRecord(json(r.response).error).message), /does not implement/);
    }
    assert.equal(gw.plain.stats.total + gw.secure.stats.total, 0, "nothing was sent");

    // data_collection: "deny" is zdr: only the ZDR provider, also when it fails.
    gw.secure.setFault({ kind: "status", status: 500 });
    const deny = await post({ data_collection: "deny" });
    assert.ok(deny.status >= 500);
    assert.equal(gw.plain.stats.total, 0, "never the non-ZDR provider");
    assert.equal((await post({ data_collection: "deny" }, "demo/vision")).status, 404);
    // allow_fallbacks: false → only the first provider; the default fails over.
    assert.ok((await post({ allow_fallbacks: false })).status >= 500);
    assert.equal(gw.plain.stats.total, 0);
    assert.equal((await post({})).status, 200);
    assert.equal(gw.plain.stats.total, 1);
    gw.secure.setFault(null);
    gw.plain.resetStats();
    gw.secure.resetStats();
    // order: plain first (the verified secure provider would otherwise be preferred).
    assert.equal((await post({ order: ["plain"] })).status, 200);
    assert.equal(gw.plain.stats.total, 1);
    // only / ignore.
    assert.equal((await post({ only: ["plain"] })).status, 200);
    assert.equal((await post({ ignore: ["secure"] })).status, 200);
    assert.equal(gw.plain.stats.total, 3);
    assert.equal(gw.secure.stats.total, 0);
    // order + allow_fallbacks: false → only the listed providers.
    gw.plain.setFault({ kind: "status", status: 500 });
    assert.ok((await post({ order: ["plain"], allow_fallbacks: false })).status >= 500);
    assert.equal(gw.secure.stats.total, 0);
    gw.plain.setFault(null);
    // only a provider that does not serve the model → 404; an unknown name → 400.
    assert.equal((await post({ only: ["secure"] }, "demo/vision")).status, 404);
    const unknown = await post({ only: ["nope"] });
    assert.equal(unknown.status, 400);
    assert.equal(asRecord(json(unknown.response).error).param, "provider.only[0]");
    assert.equal((await post({ order: "plain" })).status, 400);
    assert.equal((await post({ data_collection: "never" })).status, 400);
  } finally {
    await gw.close();
  }
});

Deno.test("a revoked key and an unknown key get the same 401, on every surface with invalid_api_key", async () => {
  const gw = await startTestGateway();
  try {
    const revoked = await gw.newKey();
    const rec = await gw.gateway.ctx.auth.authenticate(`Bearer ${revoked}`);
    await revokeKey(gw.kv, rec.key_id, Date.now);
    gw.gateway.ctx.auth.invalidate(rec.key_id);
    const unknown = "cgw-" + "A".repeat(43);
    assert.notEqual(keyDigest(unknown), rec.digest);
    const answers: string[] = [];
    for (const key of [revoked, unknown]) {
      const r = await postRaw(gw.url, "/v1/chat/completions", {
        model: "demo/echo",
        messages: m,
      }, key);
      assert.equal(r.status, 401);
      answers.push(new TextDecoder().decode(r.response));
    }
    assert.equal(answers[0], answers[1], "indistinguishable");
    // The Anthropic envelope carries the code too.
    const anthropic = new Anthropic({ baseURL: gw.url, apiKey: unknown, maxRetries: 0 });
    await assert.rejects(
      anthropic.messages.create({
        model: "demo/echo",
        max_tokens: 5,
        messages: [{ role: "user", content: "x" }],
      }),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.AuthenticationError);
        const body = asRecord((e as { error: unknown }).error);
        assert.equal(asRecord(body.error).code, "invalid_api_key");
        return true;
      },
    );
    // The sessions endpoints: missing and bad keys alike.
    for (
      const headers of [{}, { authorization: `Bearer ${unknown}` }] as Record<string, string>[]
    ) {
      for (const path of ["/v1/aci/sessions", `/v1/aci/sessions/${"a".repeat(64)}`]) {
        const res = await fetch(`${gw.url}${path}`, { headers });
        const b = asRecord(await res.json());
        assert.equal(res.status, 401, path);
        assert.equal(asRecord(b.error).code, "invalid_api_key", path);
      }
    }
  } finally {
    await gw.close();
  }
});

Deno.test("spec limits: temperature up to 2 on /v1/messages; context_length enforced with the real tokenizer; embeddings get default_dimensions", async () => {
  const gw = await startTestGateway();
  try {
    const anthropic = new Anthropic({ baseURL: gw.url, apiKey: gw.apiKey, maxRetries: 0 });
    // (This SDK version's types lack `temperature`; the wire request is what counts.)
    const messages = (temperature: number) =>
      postRaw(
        gw.url,
        "/v1/messages",
        {
          model: "demo/echo",
          max_tokens: 5,
          temperature,
          messages: [{ role: "user", content: "hello" }],
        },
        null,
        { "x-api-key": gw.apiKey },
      );
    const ok = await messages(1.5);
    assert.equal(ok.status, 200);
    assert.equal(json(ok.response).type, "message");
    const bad = await messages(2.5);
    assert.equal(bad.status, 400);
    assert.equal(errorOf(bad.response).type, "invalid_request_error");
    assert.equal(
      (await anthropic.messages.create({
        model: "demo/echo",
        max_tokens: 5,
        messages: [{ role: "user", content: "hello" }],
      })).type,
      "message",
    );

    // ~60,000 tokens (120,000 characters: chars/4 would have said 30,000) on a 32,768 model.
    const openai = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const long = Array.from({ length: 60_000 }, (_, i) => (i % 2 ? "a" : "b")).join(" ");
    gw.plain.resetStats();
    gw.secure.resetStats();
    await assert.rejects(
      openai.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: long }],
      }),
      (e: unknown) => {
        assert.ok(e instanceof OpenAI.BadRequestError);
        assert.match(e.message, /maximum context length is 32768/);
        return true;
      },
    );
    // The prompt fits, the requested output does not.
    const half = Array.from({ length: 20_000 }, () => "word").join(" ");
    await assert.rejects(
      openai.chat.completions.create({
        model: "demo/echo",
        max_tokens: 4096,
        messages: [{ role: "user", content: half + " " + half }],
      }),
      OpenAI.BadRequestError,
    );
    await assert.rejects(
      openai.completions.create({ model: "demo/echo", prompt: ["ok", long] }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && /prompt\[1\]/.test(String(e.param)),
    );
    assert.equal(gw.plain.stats.total + gw.secure.stats.total, 0, "refused before sending");

    // Embeddings: without `dimensions`, the catalog's default_dimensions (3072 and 384).
    const large = await openai.embeddings.create({
      model: "demo/embed-large",
      input: "x",
      encoding_format: "float",
    });
    assert.equal(large.data[0].embedding.length, 3072);
    const small = await openai.embeddings.create({
      model: "demo/embed-small",
      input: "x",
      encoding_format: "float",
    });
    assert.equal(small.data[0].embedding.length, 384);
    // An embedding input past max_input_tokens (8191) by the tokenizer's count.
    await assert.rejects(
      openai.embeddings.create({ model: "demo/embed-small", input: long }),
      OpenAI.BadRequestError,
    );
  } finally {
    await gw.close();
  }
});

Deno.test("count_tokens: the Anthropic SDK's messages.countTokens, counted with the limits' tokenizer", async () => {
  const gw = await startTestGateway({
    configure: (c: GatewayConfig) => {
      c.models.find((x) => x.id === "demo/echo-next")!.tokenizer = "cl100k_base";
    },
  });
  try {
    const anthropic = new Anthropic({ baseURL: gw.url, apiKey: gw.apiKey, maxRetries: 0 });
    const { countChat } = await import("../src/tokens/count.ts");
    const text = "The quick brown fox jumps over the lazy dog. ".repeat(40);
    const o200 = await anthropic.messages.countTokens({
      model: "demo/echo",
      system: "be brief",
      messages: [{ role: "user", content: text }],
    });
    assert.equal(
      o200.input_tokens,
      countChat(
        [{ role: "system", content: "be brief" }, { role: "user", content: text }],
        "o200k_base",
      ),
    );
    assert.ok(o200.input_tokens > 400 && o200.input_tokens < 500, String(o200.input_tokens));
    const cl = await anthropic.messages.countTokens({
      model: "demo/echo-next",
      messages: [{ role: "user", content: "naïve café – 東京 🚀" }],
    });
    assert.equal(
      cl.input_tokens,
      countChat([{ role: "user", content: "naïve café – 東京 🚀" }], "cl100k_base"),
    );
    assert.notEqual(
      cl.input_tokens,
      countChat([{ role: "user", content: "naïve café – 東京 🚀" }], "o200k_base"),
      "the model's own tokenizer is used",
    );
    // Tools are counted too.
    const withTools = await anthropic.messages.countTokens({
      model: "demo/echo",
      messages: [{ role: "user", content: "hi" }],
      tools: [{
        name: "get_weather",
        description: "Weather for a city",
        input_schema: { type: "object", properties: { city: { type: "string" } } },
      }],
    });
    const plainCount = await anthropic.messages.countTokens({
      model: "demo/echo",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.ok(withTools.input_tokens > plainCount.input_tokens + 10);
    await assert.rejects(
      anthropic.messages.countTokens({
        model: "nope/model",
        messages: [{ role: "user", content: "x" }],
      }),
      Anthropic.NotFoundError,
    );
    const bad = new Anthropic({ baseURL: gw.url, apiKey: "cgw-" + "B".repeat(43), maxRetries: 0 });
    await assert.rejects(
      bad.messages.countTokens({ model: "demo/echo", messages: [{ role: "user", content: "x" }] }),
      Anthropic.AuthenticationError,
    );
    assert.equal(gw.plain.stats.total + gw.secure.stats.total, 0, "nothing sent upstream");
  } finally {
    await gw.close();
  }
});
