/**
 * Issue 31, "honest catalog and errors", against the real gateway and the demo
 * upstreams: the catalog advertises only what every route does (`n`), upstream
 * refusals of the gateway's configuration are 502s with an operator log line,
 * the start-up check warns about routes the upstream does not list, the
 * session list shows only sessions a live replica serves, one 401 code, the
 * Anthropic SDK's `models.list`, `stop_sequence`, embeddings' limits, and the
 * routing constraints as headers.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { withRecordedGateway } from "./support/recorded_gateway.ts";
import { CURRENT_PREFIX } from "../src/sessions/store.ts";

async function withGateway(
  fn: (gw: TestGateway) => Promise<void>,
  opts: Parameters<typeof startTestGateway>[0] = {},
) {
  const gw = await startTestGateway(opts);
  try {
    await fn(gw);
  } finally {
    await gw.close();
  }
}

const openai = (gw: TestGateway) =>
  new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });

function post(gw: TestGateway, path: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${gw.url}${path}`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${gw.apiKey}`,
      "content-type": "application/json",
      ...headers,
    },
    body: JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, body: await r.json() }));
}

const hi = [{ role: "user", content: "hi" }];

Deno.test("catalog: a parameter one route refuses is not advertised, and a request using it is a 400 naming it", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const models = await openai(gw).models.list();
    const echo = models.data.find((m) => m.id === "demo/echo") as unknown as {
      supported_parameters: string[];
    };
    assert.ok(!echo.supported_parameters.includes("n"));
    assert.ok(echo.supported_parameters.includes("temperature"));
    const r = await post(gw, "/v1/chat/completions", { model: "demo/echo", messages: hi, n: 2 });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.param, "n");
    assert.equal(sent("/v1/chat/completions").length, 0);
    const one = await post(gw, "/v1/chat/completions", { model: "demo/echo", messages: hi, n: 1 });
    assert.equal(one.status, 200);
  }, (c) => {
    c.models.find((m) => m.id === "demo/echo")!.routes[0].unsupported_parameters = ["n"];
  });
});

Deno.test("a wrong upstream model name in the configuration: 502 for the client, an operator log line, a start-up warning", async () => {
  await withGateway(async (gw) => {
    const warned = gw.logs.filter((l) =>
      l.msg === "a route's upstream model is not in its provider's /v1/models"
    );
    assert.deepEqual(warned.map((l) => [l.provider, l.upstream_model, l.model]), [
      ["plain", "no-such-upstream-model", "demo/vision"],
    ]);
    const r = await post(gw, "/v1/chat/completions", { model: "demo/vision", messages: hi });
    assert.equal(r.status, 502);
    assert.equal(r.body.error.type, "upstream_error");
    assert.match(r.body.error.message, /configuration/);
    const line = gw.logs.find((l) => l.msg === "upstream refused the gateway's configuration");
    assert.ok(line, "operator log line");
    assert.equal(line.provider, "plain");
    assert.equal(line.upstream_model, "no-such-upstream-model");
    assert.equal(line.upstream_status, 404);
    // A correct route logs no start-up warning.
    const ok = await post(gw, "/v1/chat/completions", { model: "demo/echo", messages: hi });
    assert.equal(ok.status, 200);
  }, {
    configure: (c) => {
      c.models.find((m) => m.id === "demo/vision")!.routes = [{
        provider: "plain",
        model: "no-such-upstream-model",
      }];
    },
  });
});

Deno.test("/v1/aci/sessions lists only sessions a live replica serves", async () => {
  await withGateway(async (gw) => {
    const list = () =>
      fetch(`${gw.url}/v1/aci/sessions`, { headers: { authorization: `Bearer ${gw.apiKey}` } })
        .then((r) => r.json() as Promise<{ sessions: { session_id: string }[] }>);
    const before = await list();
    assert.equal(before.sessions.length, 1, "the secure upstream's session");
    const id = before.sessions[0].session_id;
    // Another replica (no longer running) left its current pointer to another session id.
    const stale = "f".repeat(64);
    const doc = await gw.kv.get(["sessions", id]);
    await gw.kv.set(["sessions", stale], doc.value);
    await gw.kv.set([CURRENT_PREFIX, "secure", "dead0replica"], {
      session_id: stale,
      until: Date.now() + 3_600_000,
    });
    const after = await list();
    assert.deepEqual(after.sessions.map((s) => s.session_id), [id]);
    // Pinning the listed one is served.
    const r = await post(gw, "/v1/chat/completions", {
      model: "demo/echo",
      messages: hi,
      provider: { aci_session_ids: [id] },
    });
    assert.equal(r.status, 200);
  });
});

Deno.test("401: one error.code (invalid_api_key) on inference, messages, receipts, signatures, sessions and admin", async () => {
  await withGateway(async (gw) => {
    const bad = { authorization: "Bearer cgw-not-a-key", "content-type": "application/json" };
    const codes: [string, number, string | undefined][] = [];
    const check = async (path: string, init: RequestInit = {}) => {
      const r = await fetch(`${gw.url}${path}`, init);
      const b = await r.json();
      codes.push([path, r.status, b.error?.code]);
    };
    await check("/v1/chat/completions", {
      method: "POST",
      headers: bad,
      body: JSON.stringify({ model: "demo/echo", messages: hi }),
    });
    await check("/v1/messages", {
      method: "POST",
      headers: { "x-api-key": "cgw-not-a-key", "content-type": "application/json" },
      body: JSON.stringify({ model: "demo/echo", max_tokens: 5, messages: hi }),
    });
    await check(`/v1/aci/receipts/rcpt-${"0".repeat(32)}`, { headers: bad });
    await check(`/v1/signature/rcpt-${"0".repeat(32)}`);
    await check("/v1/aci/sessions", { headers: bad });
    await check("/admin/v1/keys", { headers: bad });
    for (const [path, status, code] of codes) {
      assert.equal(status, 401, path);
      assert.equal(code, "invalid_api_key", path);
    }
  });
});

Deno.test("Anthropic SDK models.list and models.retrieve get Anthropic's model shape", async () => {
  await withGateway(async (gw) => {
    const client = new Anthropic({ baseURL: gw.url, apiKey: gw.apiKey, maxRetries: 0 });
    const ids: string[] = [];
    for await (const m of client.models.list({ limit: 2 })) {
      assert.equal(m.type, "model");
      assert.equal(typeof m.display_name, "string");
      assert.match(m.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.ok(!("object" in m));
      ids.push(m.id);
    }
    const all = (await openai(gw).models.list()).data.map((m) => m.id);
    assert.deepEqual(ids, all, "every page, in catalog order");
    const one = await client.models.retrieve("demo/echo");
    assert.deepEqual(one, {
      type: "model",
      id: "demo/echo",
      display_name: "Demo Echo",
      created_at: "2026-01-01T00:00:00Z",
    });
    // Without the version header, the OpenAI shape as before.
    const plain = await (await fetch(`${gw.url}/v1/models`)).json();
    assert.equal(plain.object, "list");
    assert.equal(plain.data[0].object, "model");
  });
});

Deno.test("Anthropic: a stop sequence that ended the text is reported, whole and streamed", async () => {
  await withGateway(async (gw) => {
    const client = new Anthropic({ baseURL: gw.url, apiKey: gw.apiKey, maxRetries: 0 });
    const params = {
      model: "demo/echo",
      max_tokens: 100,
      stop_sequences: ["STOP", "never"],
      messages: [{ role: "user" as const, content: "alpha beta STOP gamma" }],
    };
    const msg = await client.messages.create(params);
    assert.equal(msg.stop_reason, "stop_sequence");
    assert.equal(msg.stop_sequence, "STOP");
    assert.deepEqual(msg.content, [{ type: "text", text: "Echo: alpha beta " }]);
    const streamed = await client.messages.stream(params).finalMessage();
    assert.equal(streamed.stop_reason, "stop_sequence");
    assert.equal(streamed.stop_sequence, "STOP");
    const plain = await client.messages.create({ ...params, stop_sequences: ["never"] });
    assert.equal(plain.stop_reason, "end_turn");
    assert.equal(plain.stop_sequence, null);
  });
});

Deno.test("embeddings: 2,049 inputs get the 2,048-limit message; empty strings are refused", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const client = openai(gw);
    await assert.rejects(
      client.embeddings.create({ model: "demo/embed-small", input: Array(2049).fill("x") }),
      (e: InstanceType<typeof OpenAI.APIError>) =>
        e.status === 400 && /at most 2048 inputs/.test(e.message),
    );
    for (const input of ["", ["a", ""]]) {
      await assert.rejects(
        client.embeddings.create({ model: "demo/embed-small", input }),
        (e: InstanceType<typeof OpenAI.APIError>) =>
          e.status === 400 && /empty string/.test(e.message),
      );
    }
    assert.equal(sent("/v1/embeddings").length, 0);
    const ok = await client.embeddings.create({
      model: "demo/embed-small",
      input: Array(2048).fill("x"),
    });
    assert.equal(ok.data.length, 2048);
  });
});

Deno.test("routing constraints as headers: same strict parsing, header/body conflicts are 400s", async () => {
  await withRecordedGateway(async ({ gw, sent }) => {
    const chat = (body: Record<string, unknown>, headers: Record<string, string>) =>
      post(gw, "/v1/chat/completions", { model: "demo/echo", messages: hi, ...body }, headers);
    // demo/echo is served only by the plain (non-ZDR, unverified) upstream here.
    const zdr = await chat({}, { "x-provider-zdr": "true" });
    assert.equal(zdr.status, 404);
    assert.equal(zdr.body.error.code, "no_zdr_provider");
    assert.equal(zdr.body.error.param, "x-provider-zdr", "names what the client sent");
    const deny = await chat({ provider: { data_collection: "deny" } }, {});
    assert.equal(deny.body.error.param, "provider.data_collection");
    const verified = await chat({}, { "x-provider-aci-verified": "true" });
    assert.equal(verified.status, 503);
    for (
      const [h, v] of [
        ["x-provider-zdr", "yes"],
        ["x-provider-zdr", "TRUE"],
        ["x-provider-aci-verified", "1"],
        ["x-provider-aci-session-ids", ""],
        ["x-provider-aci-session-ids", "a,,b"],
      ]
    ) {
      const r = await chat({}, { [h]: v });
      assert.equal(r.status, 400, `${h}: ${v}`);
      assert.equal(r.body.error.param, h);
    }
    const conflict = await chat({ provider: { zdr: false } }, { "x-provider-zdr": "true" });
    assert.equal(conflict.status, 400);
    assert.equal(conflict.body.error.param, "x-provider-zdr");
    const ids = await chat({ provider: { aci_verified: false } }, {
      "x-provider-aci-session-ids": "abc",
    });
    assert.equal(ids.status, 400, "session ids imply aci_verified");
    const agree = await chat({ provider: { zdr: false } }, { "x-provider-zdr": "false" });
    assert.equal(agree.status, 200);
    assert.equal(sent("/v1/chat/completions").length, 1, "only the satisfiable request went out");
  });
  // With the confidential upstream routed: headers select it, and a session id pins it.
  await withGateway(async (gw) => {
    const sessions = await fetch(`${gw.url}/v1/aci/sessions`, {
      headers: { authorization: `Bearer ${gw.apiKey}` },
    }).then((r) => r.json());
    const id = sessions.sessions[0].session_id as string;
    const r = await post(gw, "/v1/chat/completions", { model: "demo/echo", messages: hi }, {
      "x-provider-zdr": "true",
      "x-provider-aci-session-ids": `${id}, ${"0".repeat(64)}`,
    });
    assert.equal(r.status, 200);
    assert.equal(gw.secure.stats.total, 1);
    assert.equal(gw.plain.stats.total, 0);
    const none = await post(gw, "/v1/chat/completions", { model: "demo/echo", messages: hi }, {
      "x-provider-aci-session-ids": "0".repeat(64),
    });
    assert.equal(none.status, 503);
  });
});

Deno.test("constraint headers survive a proxy that rewrites bodies (drops the provider block)", async () => {
  await withGateway(async (gw) => {
    // What Portkey's gateway does to an unknown member: the body is rebuilt without it.
    const proxy = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      async (req) => {
        const body = await req.json();
        delete body.provider;
        const headers = new Headers(req.headers);
        headers.delete("content-length");
        headers.delete("host");
        const url = new URL(req.url);
        return fetch(`${gw.url}${url.pathname}`, {
          method: "POST",
          headers,
          body: JSON.stringify(body),
        });
      },
    );
    try {
      const client = new OpenAI({
        baseURL: `http://127.0.0.1:${proxy.addr.port}/v1`,
        apiKey: gw.apiKey,
        maxRetries: 0,
        defaultHeaders: { "x-provider-zdr": "true" },
      });
      // demo/vision has only the non-ZDR provider: the constraint holds, nothing is sent.
      await assert.rejects(
        client.chat.completions.create({
          model: "demo/vision",
          messages: [{ role: "user", content: "hi" }],
        }),
        (e: InstanceType<typeof OpenAI.APIError>) =>
          e.status === 404 && e.code === "no_zdr_provider",
      );
      assert.equal(gw.plain.stats.total, 0);
      const ok = await client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "hi" }],
      });
      assert.match(ok.choices[0].message.content ?? "", /Echo: hi/);
      assert.equal(gw.secure.stats.total, 1, "served by the ZDR provider");
      assert.equal(gw.plain.stats.total, 0);
      // The same constraint in the body only: the proxy drops it and the prompt goes to the
      // non-ZDR provider. This is why the headers exist.
      const bodyOnly = new OpenAI({
        baseURL: `http://127.0.0.1:${proxy.addr.port}/v1`,
        apiKey: gw.apiKey,
        maxRetries: 0,
      });
      await bodyOnly.chat.completions.create({
        model: "demo/vision",
        messages: [{ role: "user", content: "hi" }],
        // @ts-expect-error the gateway's routing block
        provider: { zdr: true },
      });
      assert.equal(gw.plain.stats.total, 1);
    } finally {
      await proxy.shutdown();
    }
  });
});
