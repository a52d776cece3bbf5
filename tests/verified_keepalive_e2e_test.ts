/**
 * The verified confidential path keeps its pinned connections alive (#19): a
 * dstack-verified TLS upstream (forged test root) serves sequential requests
 * over one pin-checked connection per API key, with no TLS handshake per
 * request; the pinned pool is dropped when the session is invalidated.
 */
import tls from "node:tls";
import OpenAI from "openai";
import assert from "node:assert/strict";
import { addDstackTdxProvider } from "./support/route_config.ts";
import { startTestGateway } from "./support/gateway.ts";
import { forgeTdxEnvironment } from "./support/tdx_forge.ts";
import { startDstackUpstream } from "./support/dstack_upstream.ts";
import { makeTestCa } from "./support/tls_servers.ts";
import { attesterFor, createAttesterDeps } from "../src/sessions/attesters/mod.ts";

Deno.test("verified path: one pinned handshake per key in steady state, a new one after invalidation", async () => {
  const forge = await forgeTdxEnvironment();
  const ca = await makeTestCa();
  const up = await startDstackUpstream({ forge, ca });
  let handshakes = 0;
  const gw = await startTestGateway({
    onPinnedHandshake: () => handshakes++,
    configure: (c) => {
      addDstackTdxProvider(c, up.url, up.caPem);
    },
    attesters: {
      attesterFor: (p) => attesterFor(p.confidential!.verifier),
      deps: createAttesterDeps({
        tlsConnect: tls.connect,
        randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
        now: Date.now,
        tdx: { collateral: forge.source, rootCaDer: forge.rootCertDer },
      }),
    },
  });
  try {
    assert.ok(gw.gateway.ctx.verification("tdx")?.verified);
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const ask = async (c: OpenAI) => {
      const res = await c.chat.completions.create({
        model: "tee/model",
        messages: [{ role: "user", content: "hello" }],
      });
      assert.ok(res.choices[0].message.content);
    };
    for (let i = 0; i < 10; i++) await ask(client);
    assert.equal(handshakes, 1, "10 verified requests, one TLS handshake");
    const other = new OpenAI({ baseURL: gw.baseURL, apiKey: await gw.newKey(), maxRetries: 0 });
    await ask(other);
    assert.equal(handshakes, 2, "another key gets its own pinned connection");
    for (let i = 0; i < 5; i++) await ask(client);
    assert.equal(handshakes, 2);
    // Invalidation (the same path a pin mismatch takes) retires the pinned pool.
    gw.gateway.manager!.invalidate("tdx", "test");
    for (let i = 0; i < 50 && !gw.gateway.ctx.verification("tdx")?.verified; i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(gw.gateway.ctx.verification("tdx")?.verified, "re-verified");
    const before = handshakes;
    await ask(client);
    assert.equal(handshakes, before + 1, "a fresh pin-checked connection after invalidation");
  } finally {
    await gw.close();
    await up.close();
  }
});
