/**
 * Prefix-cache isolation (#31): a provider configured with `cache_salt` gets
 * a salt derived server-side from the API key (the same for one key, another
 * for another key, unguessable without the secret); a client-supplied salt is
 * a 400; the receipt records the salt's digest (`cache.salted`), never the salt.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { startTestGateway } from "./support/gateway.ts";
import { startRecordingProxy } from "./support/recording_proxy.ts";
import { fetchReceipt } from "./support/receipt_check.ts";
import { saltDigest } from "../src/routing/cache_salt.ts";
import { keyDigest } from "../src/keys/keys.ts";

const SECRET = "cache-salt-secret-for-tests-" + "9c1e".repeat(8);

Deno.test("cache_salt: per-key salt sent to salt-taking providers, client salts refused, digest in the receipt", async () => {
  let proxy: ReturnType<typeof startRecordingProxy> | undefined;
  const gw = await startTestGateway({
    verification: "off",
    env: { GW_CACHE_SECRET: SECRET },
    configure: (c) => {
      c.upstream.cache_salt_secret_env = "GW_CACHE_SECRET";
      for (const m of c.models) m.routes = m.routes.filter((r) => r.provider === "plain");
      // The plain provider, behind a recording proxy, takes salts.
      const p = c.providers.find((p) => p.name === "plain")!;
      const url = new URL(p.base_url);
      proxy = startRecordingProxy(url.origin);
      p.base_url = proxy.url + url.pathname;
      p.cache_salt = true;
    },
  });
  try {
    if (!proxy) throw new Error("no proxy");
    const plain = gw.gateway.ctx.catalog.providers.get("plain")!;

    const otherKey = await gw.newKey();
    const ask = async (apiKey: string) => {
      const client = new OpenAI({ baseURL: gw.baseURL, apiKey, maxRetries: 0 });
      const { response } = await client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "a shared system prefix" }],
      }).withResponse();
      const sent = JSON.parse(new TextDecoder().decode(proxy!.exchanges.at(-1)!.request));
      return { salt: sent.cache_salt as string, receiptId: response.headers.get("x-receipt-id")! };
    };
    const a1 = await ask(gw.apiKey);
    const a2 = await ask(gw.apiKey);
    const b = await ask(otherKey);
    assert.match(a1.salt, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(a1.salt, a2.salt, "one key, one salt");
    assert.notEqual(a1.salt, b.salt, "another key, another salt");
    // Keyed: HMAC under the operator's secret, not a hash anyone could recompute from the key.
    const expected = createHmac("sha256", SECRET)
      .update("aci.cache_salt.v1\0" + keyDigest(gw.apiKey))
      .digest("base64url");
    assert.equal(a1.salt, expected);
    assert.ok(!a1.salt.includes(keyDigest(gw.apiKey)));

    // The receipt: the digest of the salt, for the route it went to; never the salt.
    const r = await fetchReceipt(gw.url, a1.receiptId, gw.apiKey);
    const text = JSON.stringify(r.body);
    assert.ok(!text.includes(a1.salt));
    const ev = (r.body as { event_log: Record<string, unknown>[] }).event_log
      .find((e) => e.type === "cache.salted");
    assert.deepEqual(ev, {
      type: "cache.salted",
      target_route_id: "plain:demo-chat",
      salt_digest: saltDigest(a1.salt),
    });

    // A client may not choose its salt (it could join another key's cache): 400, nothing sent.
    const before = proxy.exchanges.length;
    const refused = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "demo/echo",
        cache_salt: b.salt,
        messages: [{ role: "user", content: "join their cache" }],
      }),
    });
    assert.equal(refused.status, 400);
    const err = (await refused.json()).error;
    assert.equal(err.param, "cache_salt");
    assert.equal(proxy.exchanges.length, before);

    // A provider not configured for salts gets none.
    plain.cache_salt = false;
    await ask(gw.apiKey);
    const sent = JSON.parse(new TextDecoder().decode(proxy.exchanges.at(-1)!.request));
    assert.equal(sent.cache_salt, undefined);
  } finally {
    await gw.close();
    await proxy?.close();
  }
});
