/**
 * Live configuration (#31): providers, models and prices change through the
 * admin API and on SIGHUP from the file, without a restart and without
 * dropping a stream in progress; every change is validated as at start-up
 * (refused whole otherwise), logged, and versioned in the operator's /healthz.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway, TEST_ADMIN_TOKEN } from "./support/gateway.ts";
import { baseConfig, writeConfig } from "./support/process.ts";
import { spawnListening, taskArgs } from "./support/task_line.ts";
import type { GatewayConfig } from "../src/config/schema.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
/** Served by the plain provider (the confidential one has no verifier here). */
const PLAIN = { "x-service-provider": "plain" };

Deno.test("live configuration through the admin API: validated, versioned, streams kept", async () => {
  const gw = await startTestGateway({ verification: "off" });
  try {
    const put = (config: unknown) =>
      fetch(`${gw.url}/admin/v1/config`, {
        method: "PUT",
        headers: { ...admin, "content-type": "application/json" },
        body: JSON.stringify(config),
      });
    const shown = await (await fetch(`${gw.url}/admin/v1/config`, { headers: admin })).json();
    assert.equal(shown.version, 1);
    assert.match(shown.digest, /^sha256:[0-9a-f]{64}$/);
    const config = shown.config as GatewayConfig;

    // A stream starts on the old configuration…
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "keep streaming through the change please" }],
      stream: true,
    }, { headers: PLAIN });
    const it = stream[Symbol.asyncIterator]();
    let text = (await it.next()).value?.choices[0]?.delta?.content ?? "";

    // …while the operator adds a model, reprices another and removes a third.
    const next = structuredClone(config);
    const echo = next.models.find((m) => m.id === "demo/echo")!;
    echo.pricing = { ...echo.pricing, prompt: echo.pricing.prompt * 10 };
    next.models = next.models.filter((m) => m.id !== "demo/vision");
    next.models.push({
      ...structuredClone(echo),
      id: "demo/added-live",
      name: "Added live",
      aliases: [],
      routes: [{ provider: "plain", model: "demo-chat" }],
    });
    const applied = await put(next);
    assert.equal(applied.status, 200, await applied.clone().text());
    const a = await applied.json();
    assert.equal(a.version, 2);
    assert.deepEqual(a.changed, ["models"]);

    // The stream in progress finishes on the route it started on.
    for (let r = await it.next(); !r.done; r = await it.next()) {
      text += r.value.choices[0]?.delta?.content ?? "";
    }
    assert.match(text, /keep streaming through the change please/);

    // New requests see the new catalog and prices.
    const ids = (await (await fetch(`${gw.baseURL}/models`)).json()).data.map((m: { id: string }) =>
      m.id
    );
    assert.ok(ids.includes("demo/added-live") && !ids.includes("demo/vision"), ids.join(","));
    const added = await client.chat.completions.create({
      model: "demo/added-live",
      messages: [{ role: "user", content: "hello" }],
    });
    assert.equal(added.model, "demo/added-live");
    const priced = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "what do I cost now" }],
    }, { headers: PLAIN });
    const u = priced.usage as OpenAI.CompletionUsage & { cost: number };
    const expected = u.prompt_tokens * echo.pricing.prompt +
      u.completion_tokens * echo.pricing.completion;
    assert.ok(Math.abs(u.cost - expected) < 1e-9, `${u.cost} vs ${expected}`);
    const gone = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "demo/vision", messages: [{ role: "user", content: "x" }] }),
    });
    assert.equal(gone.status, 404);

    // Refused whole, each with a 400 naming the field: a restart-only section, a schema error,
    // a confidential provider, an unset credential variable.
    const refusals: [unknown, RegExp, string | null][] = [
      [{ ...next, limits: { ...next.limits, max_body_bytes: 1 } }, /limits changes only/, "limits"],
      [{ ...next, models: [{ id: "x" }] }, /invalid configuration/, null],
      [
        {
          ...next,
          providers: next.providers.map((p) =>
            p.confidential ? { ...p, base_url: "https://elsewhere.example" } : p
          ),
        },
        /confidential providers change only with a restart/,
        "providers",
      ],
      [
        {
          ...next,
          providers: next.providers.map((p) =>
            p.name === "plain" ? { ...p, api_key_env: "GW_LIVE_UNSET_VARIABLE" } : p
          ),
        },
        /GW_LIVE_UNSET_VARIABLE is not set/,
        "providers",
      ],
    ];
    for (const [body, message, param] of refusals) {
      const r = await put(body);
      assert.equal(r.status, 400);
      const e = (await r.json()).error;
      assert.match(e.message, message);
      assert.equal(e.param, param);
    }
    // Nothing of them applied; the version is the operator's, in /healthz and the log.
    const health = await (await fetch(`${gw.url}/healthz`, { headers: admin })).json();
    assert.equal(health.config.version, 2);
    assert.equal(health.config.digest, a.digest);
    const publicHealth = await (await fetch(`${gw.url}/healthz`)).json();
    assert.equal(publicHealth.config, undefined);
    assert.ok(
      gw.logs.some((l) =>
        l.msg === "configuration applied" && l.version === 2 && l.source === "admin"
      ),
    );
    assert.equal(gw.logs.filter((l) => l.msg === "configuration refused").length, 4);
    // Without the operator token: 401, nothing changes.
    const anon = await fetch(`${gw.url}/admin/v1/config`, { method: "PUT", body: "{}" });
    assert.equal(anon.status, 401);
  } finally {
    await gw.close();
  }
});

Deno.test("live configuration on SIGHUP: the file re-read and applied; a bad file changes nothing", async () => {
  const dir = await Deno.makeTempDir();
  const upstream = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => new Response("{}"),
  );
  try {
    const cfg = baseConfig({
      upstreamUrl: `http://127.0.0.1:${upstream.addr.port}`,
      storePath: `${dir}/gw.kv`,
    }) as { models: Record<string, unknown>[] };
    const path = await writeConfig(dir, cfg);
    const gw = await spawnListening(Deno.execPath(), [
      ...await taskArgs("start"),
      "--config",
      path,
    ]);
    const models = async () =>
      (await (await fetch(`${gw.url}/v1/models`)).json()).data.map((m: { id: string }) => m.id);
    const waitForLog = async (msg: string, n: number) => {
      const end = Date.now() + 20_000;
      const count = () => gw.stdout.filter((l) => l.includes(`"msg":"${msg}"`)).length;
      while (count() < n) {
        if (Date.now() > end) throw new Error(`no ${msg} log line`);
        await new Promise((r) => setTimeout(r, 25));
      }
      return gw.stdout.filter((l) => l.includes(`"msg":"${msg}"`)).at(-1)!;
    };
    try {
      assert.deepEqual(await models(), ["demo/echo"]);
      await writeConfig(dir, {
        ...cfg,
        models: [...cfg.models, { ...cfg.models[0], id: "demo/from-file" }],
      });
      gw.child.kill("SIGHUP");
      const applied = JSON.parse(await waitForLog("configuration applied", 1));
      assert.equal(applied.source, "file");
      assert.equal(applied.version, 2);
      assert.deepEqual(await models(), ["demo/echo", "demo/from-file"]);

      await Deno.writeTextFile(path, "{ not json");
      gw.child.kill("SIGHUP");
      const refused = JSON.parse(await waitForLog("configuration refused", 1));
      assert.match(refused.error, /not valid JSON/);
      assert.deepEqual(await models(), ["demo/echo", "demo/from-file"]);
    } finally {
      assert.equal((await gw.stop()).code, 0);
    }
  } finally {
    await upstream.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});
