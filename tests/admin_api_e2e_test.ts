/**
 * The admin HTTP API (issue #17 item 2), the key holder's own `/v1/key` and
 * `/v1/usage` (item 3) and the public/operator split of `/healthz` (issue #15
 * item 7), against the real gateway on a loopback port with the real openai
 * SDK making the traffic.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { dayOf } from "../src/admission/usage_daily.ts";
import { fakeClock } from "./support/fake_clock.ts";

const TOKEN = "operator-token-" + "0123456789abcdef".repeat(3);

async function withGateway(
  fn: (gw: TestGateway) => Promise<void>,
  env: Record<string, string> = { GATEWAY_ADMIN_TOKEN: TOKEN },
  now?: () => number,
) {
  const gw = await startTestGateway({ env, now });
  try {
    await fn(gw);
  } finally {
    await gw.close();
  }
}

async function admin(
  gw: TestGateway,
  method: string,
  path: string,
  body?: unknown,
  token: string | null = TOKEN,
) {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: text ? JSON.parse(text) : null };
}

async function own(gw: TestGateway, path: string, key: string) {
  const res = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, json: await res.json() };
}

Deno.test("admin API: every key route, with the CLI's semantics", async () => {
  await withGateway(async (gw) => {
    // create
    const created = await admin(gw, "POST", "/keys", {
      tier: "free",
      name: "team a",
      credits: "2.5",
    });
    assert.equal(created.status, 201);
    assert.equal(created.headers.get("cache-control"), "no-store");
    const { key, key_id } = created.json;
    assert.match(key, /^cgw-/);
    assert.match(key_id, /^key_[0-9a-f]{12}$/);
    assert.equal(created.json.balance, "2.5");
    assert.equal(created.json.tier, "free");

    // the new key works with the real SDK, and its spending shows up
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: key, maxRetries: 0 });
    await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "count me" }],
    });

    // list: every key, one balance figure
    const list = await admin(gw, "GET", "/keys");
    assert.equal(list.status, 200);
    const row = list.json.data.find((k: { key_id: string }) => k.key_id === key_id);
    assert.equal(row.name, "team a");
    assert.equal(row.status, "active");
    assert.ok(!list.text.includes(key), "the key itself is never listed");

    // show: usage, limits, window
    const shown = await admin(gw, "GET", `/keys/${key_id}`);
    assert.equal(shown.status, 200);
    assert.equal(shown.json.usage.requests, 1);
    assert.ok(shown.json.usage.prompt_tokens > 0);
    assert.deepEqual(shown.json.limits, { rpm: 60, tpm: 100_000, custom: false });
    assert.equal(shown.json.rate_limit.requests >= 1, true);
    assert.equal(row.balance, shown.json.balance);

    // credit: the figure printed is the same as show's
    const credited = await admin(gw, "POST", `/keys/${key_id}/credit`, { amount: "1" });
    assert.equal(credited.status, 200);
    const after = await admin(gw, "GET", `/keys/${key_id}`);
    assert.equal(credited.json.balance, after.json.balance);
    assert.equal(credited.json.warning, undefined);

    // set tier and limits
    const ent = await admin(gw, "PATCH", `/keys/${key_id}`, {
      tier: "enterprise",
      rpm: 7,
      tpm: 7000,
    });
    assert.equal(ent.status, 200);
    assert.deepEqual(ent.json.limits, { rpm: 7, tpm: 7000, custom: true });
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "demo/echo", messages: [{ role: "user", content: "x" }] }),
    });
    await res.body?.cancel();
    assert.equal(res.headers.get("x-ratelimit-limit"), "7", "new limits apply at once");
    const badLimits = await admin(gw, "PATCH", `/keys/${key_id}`, { tier: "pro", rpm: 5 });
    assert.equal(badLimits.status, 400);
    assert.match(badLimits.json.error.message, /together|enterprise/);
    const back = await admin(gw, "PATCH", `/keys/${key_id}`, { tier: "pro" });
    assert.deepEqual(back.json.limits, { rpm: 600, tpm: 1_000_000, custom: false });

    // usage per model and day
    const today = dayOf(Date.now());
    const usage = await admin(gw, "GET", `/keys/${key_id}/usage?from=${today}&to=${today}`);
    assert.equal(usage.status, 200);
    assert.equal(usage.json.data.length, 1);
    assert.equal(usage.json.data[0].model, "demo/echo");
    assert.equal(usage.json.data[0].date, today);
    assert.equal(usage.json.data[0].requests, 2);
    // Across keys: per key and model, days summed.
    const across = await admin(gw, "GET", `/usage?from=${today}&to=${today}`);
    assert.equal(across.status, 200);
    const mine = across.json.data.filter((r: { key_id: string }) => r.key_id === key_id);
    assert.deepEqual(mine.map((r: { model: string; requests: number }) => [r.model, r.requests]), [
      ["demo/echo", 2],
    ]);
    const badRange = await admin(gw, "GET", `/keys/${key_id}/usage?from=2026-13-01`);
    assert.equal(badRange.status, 400);
    assert.equal(badRange.json.error.param, "from");

    // revoke, then the key is refused at once, and crediting it warns
    const revoked = await admin(gw, "POST", `/keys/${key_id}/revoke`);
    assert.equal(revoked.status, 200);
    assert.equal(revoked.json.status, "revoked");
    await assert.rejects(
      client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "x" }],
      }),
      (e: unknown) => e instanceof OpenAI.AuthenticationError,
    );
    const warned = await admin(gw, "POST", `/keys/${key_id}/credit`, { amount: "1" });
    assert.equal(warned.status, 200);
    assert.match(warned.json.warning, /revoked/);
    assert.equal((await own(gw, "/v1/key", key)).status, 401);

    // unknown keys, bad bodies
    assert.equal((await admin(gw, "GET", "/keys/key_000000000000")).status, 404);
    assert.equal((await admin(gw, "POST", "/keys/key_000000000000/revoke")).status, 404);
    assert.equal((await admin(gw, "GET", "/keys/nope")).status, 400);
    const unknownField = await admin(gw, "POST", "/keys", { tier: "free", credit: "1" });
    assert.equal(unknownField.status, 400);
    const badTier = await admin(gw, "POST", "/keys", { tier: "gold" });
    assert.equal(badTier.status, 400);
    assert.equal(badTier.json.error.param, "tier");

    // every call is logged as one admin line, without the token or any key
    const lines = gw.logs.filter((l) => l.msg === "admin");
    assert.ok(lines.length >= 15);
    assert.ok(lines.some((l) => l.action === "keys.create" && l.status === 201));
    assert.ok(lines.some((l) => l.action === "keys.revoke" && l.key_id === key_id));
    const all = JSON.stringify(gw.logs);
    assert.ok(!all.includes(TOKEN), "no token in logs");
    assert.ok(!all.includes(key), "no key in logs");
  });
});

Deno.test("admin API: a wrong or missing token is 401 on every route and logged", async () => {
  await withGateway(async (gw) => {
    const routes: [string, string, unknown?][] = [
      ["POST", "/keys", { tier: "free" }],
      ["GET", "/keys"],
      ["GET", "/keys/key_000000000000"],
      ["PATCH", "/keys/key_000000000000", { tier: "pro" }],
      ["POST", "/keys/key_000000000000/credit", { amount: "1" }],
      ["POST", "/keys/key_000000000000/revoke"],
      ["GET", "/keys/key_000000000000/usage"],
      ["GET", "/usage"],
      ["GET", "/health"],
      ["GET", "/metrics"],
    ];
    for (const [method, path, body] of routes) {
      for (const token of [null, TOKEN + "x", TOKEN.slice(1), gw.apiKey]) {
        const r = await admin(gw, method, path, body, token);
        assert.equal(r.status, 401, `${method} ${path} with ${token?.slice(0, 4)}`);
        assert.equal(r.json.error.code, "invalid_api_key");
      }
    }
    // Nothing was created by the refused calls.
    const list = await admin(gw, "GET", "/keys");
    assert.equal(list.json.data.length, 1);
    const refused = gw.logs.filter((l) => l.msg === "admin" && l.outcome === "unauthorized");
    assert.equal(refused.length, routes.length * 4);
    assert.ok(!JSON.stringify(gw.logs).includes(TOKEN.slice(1)));
  });
});

Deno.test("admin API: off (404) without a token; a weak token stops start-up", async () => {
  await withGateway(async (gw) => {
    for (const token of [null, TOKEN]) {
      const r = await admin(gw, "GET", "/keys", undefined, token);
      assert.equal(r.status, 404);
    }
    // /healthz never shows detail then.
    const h = await fetch(`${gw.url}/healthz`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.deepEqual(Object.keys(await h.json()), ["status"]);
  }, {});
  await assert.rejects(
    startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: "short" } }),
    /at least 32 characters/,
  );
});

/** `withGateway` on a frozen wall clock: the rate buckets do not drain during the test. */
const withFrozenClock = (fn: (gw: TestGateway) => Promise<void>) =>
  withGateway(fn, undefined, fakeClock(Date.now()).now);

Deno.test("GET /v1/key and /v1/usage answer only for the calling key", async () => {
  await withFrozenClock(async (gw) => {
    const a = await gw.newKey({ tier: "free", credits: 3 });
    const b = await gw.newKey({ tier: "pro", credits: 5 });
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: a, maxRetries: 0 });
    await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "hello there" }],
    });
    await client.embeddings.create({ model: "demo/embed-small", input: "x" });

    const ka = await own(gw, "/v1/key", a);
    assert.equal(ka.status, 200);
    assert.equal(ka.json.data.tier, "free");
    assert.deepEqual(ka.json.data.limits, { rpm: 60, tpm: 100_000 });
    assert.equal(ka.json.data.usage.requests, 2);
    assert.ok(Number(ka.json.data.spent) > 0);
    assert.equal(ka.json.data.rate_limit.interval_seconds, 60);
    // The two requests made (the wall clock is frozen: the bucket does not drain), apart
    // from what a quota lease holds unused.
    const rl = ka.json.data.rate_limit;
    assert.equal(rl.requests_used, 2);
    assert.equal(rl.requests_remaining, 60 - rl.requests_used - rl.requests_reserved);
    // The credit figures are the admin API's for the same key.
    const shown = await admin(gw, "GET", `/keys/${ka.json.data.key_id}`);
    for (const f of ["balance", "reserved", "available"]) {
      assert.equal(ka.json.data[f], shown.json[f], f);
    }

    const kb = await own(gw, "/v1/key", b);
    assert.equal(kb.json.data.tier, "pro");
    assert.equal(kb.json.data.usage.requests, 0);
    assert.notEqual(kb.json.data.key_id, ka.json.data.key_id);

    const ua = await own(gw, "/v1/usage", a);
    assert.equal(ua.status, 200);
    const models = ua.json.data.map((r: { model: string }) => r.model).sort();
    assert.deepEqual(models, ["demo/echo", "demo/embed-small"]);
    assert.equal(ua.json.key_id, ka.json.data.key_id);
    const ub = await own(gw, "/v1/usage", b);
    assert.deepEqual(ub.json.data, []);
    // Ranges: the day before has nothing; bad ranges are 400 naming the parameter.
    const y = dayOf(Date.now() - 86_400_000);
    assert.deepEqual((await own(gw, `/v1/usage?from=${y}&to=${y}`, a)).json.data, []);
    const bad = await own(gw, "/v1/usage?from=2026-02-01&to=2026-01-01", a);
    assert.equal(bad.status, 400);
    const tooLong = await own(gw, "/v1/usage?from=2020-01-01&to=2026-01-01", a);
    assert.equal(tooLong.status, 400);
    assert.equal((await own(gw, "/v1/usage", "cgw-" + "A".repeat(43))).status, 401);
    const none = await fetch(`${gw.url}/v1/key`);
    assert.equal(none.status, 401);
    await none.body?.cancel();
  });
});

Deno.test("/healthz: status only in public, detail with the operator token", async () => {
  await withGateway(async (gw) => {
    const pub = await fetch(`${gw.url}/healthz`);
    const body = await pub.json();
    assert.equal(pub.status, 200);
    assert.deepEqual(body, { status: "ok" });
    const text = JSON.stringify(body);
    assert.ok(!/session|spki|reason/i.test(text));
    // A client API key is not the operator token.
    const withKey = await fetch(`${gw.url}/healthz`, {
      headers: { authorization: `Bearer ${gw.apiKey}` },
    });
    assert.deepEqual(await withKey.json(), { status: "ok" });
    const op = await fetch(`${gw.url}/healthz`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const detail = await op.json();
    assert.equal(detail.status, "ok");
    const secure = Object.values(detail.upstreams)[0] as Record<string, unknown>;
    assert.equal(secure.verified, true);
    assert.match(String(secure.session_id), /^[0-9a-f]{64}$/);
    assert.equal(typeof secure.verifier_id, "string");
    assert.ok(!("sessionId" in secure), "snake_case, as the rest of the JSON");
    const viaAdmin = await admin(gw, "GET", "/health");
    assert.deepEqual(viaAdmin.json, detail);
  });
});

Deno.test("/healthz: degraded while a confidential upstream is unverified, no reason leaked", async () => {
  const gw = await startTestGateway({ verification: "off", env: { GATEWAY_ADMIN_TOKEN: TOKEN } });
  try {
    const pub = await fetch(`${gw.url}/healthz`);
    assert.equal(pub.status, 200);
    assert.deepEqual(await pub.json(), { status: "degraded" });
    const op = await admin(gw, "GET", "/health");
    assert.equal(op.json.status, "degraded");
  } finally {
    await gw.close();
  }
});
