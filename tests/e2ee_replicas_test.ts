/**
 * E2EE v2 replay protection across replicas: two real gateway processes on
 * one store, sharing an E2EE seed (so both publish and accept the same keys),
 * refuse a request already served by the other, and of two simultaneous
 * copies of one request exactly one is served.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/keys/keys.ts";
import { NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";
import * as indep from "./support/e2ee_independent.ts";

Deno.test("E2EE replay is refused across two gateway processes sharing one store", async () => {
  const dir = await Deno.makeTempDir();
  const upstream = await startDemoUpstream({ name: "plain" });
  const config = baseConfig({ upstreamUrl: upstream.url, storePath: `${dir}/gw.kv` });
  (config.identity as Record<string, unknown>).e2ee_seed_env = "GATEWAY_E2EE_SEED";
  const cfg = await writeConfig(dir, config);
  const env = { GATEWAY_E2EE_SEED: randomBytes(32).toString("hex") };
  const a = await spawnGateway(cfg, [], env);
  const b = await spawnGateway(cfg, [], env);
  const kv = await Deno.openKv(`${dir}/gw.kv`);
  try {
    const { key } = await createKey(kv, {
      tier: "pro",
      now: Date.now,
      creditsNano: 10n * NANO_PER_CREDIT,
    });
    const keysOf = async (url: string) => {
      const r = await (await fetch(`${url}/v1/aci/attestation`)).json();
      return r.attestation.workload_keyset;
    };
    const [ka, kb] = [await keysOf(a.url), await keysOf(b.url)];
    // Each replica has its own receipt keys, and the same attested E2EE keys.
    assert.notEqual(ka.receipt_signing_keys[0].public_key, kb.receipt_signing_keys[0].public_key);
    assert.deepEqual(ka.e2ee_public_keys, kb.e2ee_public_keys);
    const service = ka.e2ee_public_keys[0].public_key as string;

    const request = async () => {
      const nonce = randomBytes(32).toString("hex");
      const ts = Math.floor(Date.now() / 1000);
      const client = indep.clientKeys(indep.X25519);
      const ad = indep.aad("request", {
        algo: indep.X25519,
        field: "messages.0.content",
        model: "demo/echo",
        nonce,
        ts,
      });
      const body = JSON.stringify({
        model: "demo/echo",
        messages: [{ role: "user", content: await indep.encrypt(indep.X25519, service, "hi", ad) }],
        max_tokens: 5,
      });
      const headers = {
        "content-type": "application/json",
        authorization: `Bearer ${key}`,
        "x-e2ee-version": "2",
        "x-client-pub-key": client.pk,
        "x-model-pub-key": service,
        "x-e2ee-nonce": nonce,
        "x-e2ee-timestamp": String(ts),
      };
      return (url: string) =>
        fetch(`${url}/v1/chat/completions`, { method: "POST", headers, body }).then(
          async (r) => ({ status: r.status, body: await r.json() }),
        );
    };

    const first = await request();
    const served = await first(a.url);
    assert.equal(served.status, 200, JSON.stringify(served.body));
    const replayed = await first(b.url);
    assert.equal(replayed.status, 400);
    assert.equal(replayed.body.error.type, "e2ee_replay_detected");
    assert.equal((await first(a.url)).body.error.type, "e2ee_replay_detected");

    // Simultaneous copies on both replicas: one is served, the others are replays.
    for (let round = 0; round < 3; round++) {
      const send = await request();
      const results = await Promise.all([send(a.url), send(b.url), send(a.url), send(b.url)]);
      const statuses = results.map((r) => r.status).sort();
      assert.deepEqual(statuses, [200, 400, 400, 400], JSON.stringify(results.map((r) => r.body)));
      for (const r of results.filter((r) => r.status === 400)) {
        assert.equal(r.body.error.type, "e2ee_replay_detected");
      }
    }
    // The claims hold only digests, and expire with the acceptance window.
    const claims = [];
    for await (const e of kv.list<number>({ prefix: ["e2ee_replay"] })) claims.push(e);
    assert.equal(claims.length, 4);
    for (const c of claims) {
      assert.match(String(c.key[1]), /^[0-9a-f]{64}$/);
      assert.ok(c.value > Date.now() && c.value <= Date.now() + 302_000);
    }
  } finally {
    kv.close();
    await a.stop();
    await b.stop();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});
