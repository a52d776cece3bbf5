/**
 * Two real gateway processes on one store share one rate limit, one credit
 * balance, receipts and the replica list: on one KV file, and on a remote
 * store over KV Connect (the multi-host topology of docs/topology.md).
 */
import assert from "node:assert/strict";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/keys/keys.ts";
import { getBalance, getUsage, NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { baseConfig, spawnGateway, writeConfig, writeListenerCert } from "./support/process.ts";
import { startKvConnectServer } from "./support/kv_connect_server.ts";

Deno.test("two gateway processes share one rate limit and one balance; SIGTERM exits 0", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await twoReplicasOnOneStore(dir, `${dir}/gw.kv`, {});
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("two gateway processes share a remote store over KV Connect", async () => {
  const dir = await Deno.makeTempDir();
  const remote = startKvConnectServer();
  // This process's own handle on the store reads the token from its environment too.
  Deno.env.set("DENO_KV_ACCESS_TOKEN", remote.token);
  try {
    await twoReplicasOnOneStore(dir, remote.url, { DENO_KV_ACCESS_TOKEN: remote.token });
    // Everything went through the protocol: no local file was made.
    const { reads, writes } = remote.store.served;
    assert.ok(reads > 0 && writes > 0, `${reads} remote reads, ${writes} remote writes`);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["config.json"]);
  } finally {
    await remote.close();
    await Deno.remove(dir, { recursive: true });
  }
});

async function twoReplicasOnOneStore(
  dir: string,
  storePath: string,
  env: Record<string, string>,
): Promise<void> {
  const upstream = await startDemoUpstream({ name: "plain" });
  const cfg = await writeConfig(dir, baseConfig({ upstreamUrl: upstream.url, storePath }));
  const a = await spawnGateway(cfg, [], env);
  const b = await spawnGateway(cfg, [], env);
  const kv = await Deno.openKv(storePath);
  try {
    const { key, record } = await createKey(kv, {
      tier: "enterprise",
      rpm: 10,
      tpm: 1_000_000,
      now: Date.now,
      creditsNano: 1n * NANO_PER_CREDIT,
    });
    const other =
      (await createKey(kv, { tier: "pro", now: Date.now, creditsNano: NANO_PER_CREDIT })).key;
    const ask = (url: string) =>
      fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
        body: JSON.stringify({
          model: "demo/echo",
          messages: [{ role: "user", content: "one two three" }],
          max_tokens: 5,
        }),
      }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) => ask(i % 2 ? a.url : b.url)),
    );
    const ok = results.filter((r) => r.status === 200);
    assert.equal(ok.length, 10, `statuses: ${results.map((r) => r.status).join(",")}`);
    assert.ok(results.every((r) => r.status === 200 || r.status === 429));
    // One balance: it dropped by exactly the sum of the served responses' costs.
    const spent = ok.reduce((acc, r) => {
      const u = r.body.usage;
      return acc + BigInt(Math.ceil(u.prompt_tokens * 1000 + u.completion_tokens * 2000 - 1e-6));
    }, 0n);
    assert.equal(await getBalance(kv, record.key_id), NANO_PER_CREDIT - spent);
    assert.equal((await getUsage(kv, record.key_id)).requests, 10n);

    // A receipt made by one replica is served by the other.
    const first = await fetch(`${a.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${other}` },
      body: JSON.stringify({ model: "demo/echo", messages: [{ role: "user", content: "hi" }] }),
    });
    const receiptId = first.headers.get("x-receipt-id");
    await first.body?.cancel();
    const fromB = await fetch(`${b.url}/v1/aci/receipts/${receiptId}`, {
      headers: { authorization: `Bearer ${other}` },
    });
    assert.equal(fromB.status, 200);
    const receipt = await fromB.json();
    assert.equal(receipt.receipt_id, receiptId);
    // Each replica lists every live replica's attestation; their keysets differ.
    const reportA = await (await fetch(`${a.url}/v1/aci/attestation`)).json();
    const reportB = await (await fetch(`${b.url}/v1/aci/attestation`)).json();
    assert.equal(reportA.all_attestations.length, 2);
    assert.equal(reportB.all_attestations.length, 2);
    assert.notEqual(reportA.workload_keyset_digest, reportB.workload_keyset_digest);
    assert.equal(receipt.workload_keyset_digest, reportA.workload_keyset_digest);
    // B can still serve the report of A's keyset, so A's receipts verify from B alone.
    const archived = await fetch(
      `${b.url}/v1/aci/attestation?workload_keyset_digest=${reportA.workload_keyset_digest}`,
    );
    assert.equal(archived.status, 200);
    await archived.body?.cancel();
  } finally {
    kv.close();
    const sa = await a.stop("SIGTERM");
    const sb = await b.stop("SIGTERM");
    await upstream.close();
    assert.equal(sa.code, 0);
    assert.equal(sb.code, 0);
  }
}

Deno.test("a production configuration refuses to start without a TEE quote provider", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cfg = baseConfig({ upstreamUrl: "http://127.0.0.1:9", storePath: `${dir}/gw.kv` });
    cfg.identity = { quote_provider: "auto", configfs_root: `${dir}/no-configfs` };
    const path = await writeConfig(dir, cfg);
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "main.ts", "serve", "--config", path],
      cwd: new URL("../", import.meta.url).pathname,
      env: { NO_COLOR: "1" },
    }).output();
    assert.notEqual(out.code, 0);
    assert.match(new TextDecoder().decode(out.stderr), /no TEE quote provider/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a gateway terminating TLS lists its key in the attested keyset", async () => {
  const dir = await Deno.makeTempDir();
  const { ca, cert, files } = await writeListenerCert(dir);
  const cfg = baseConfig({ upstreamUrl: "http://127.0.0.1:9", storePath: `${dir}/gw.kv` });
  cfg.listen = { base: { hostname: "127.0.0.1", port: 0, ...files } };
  const gw = await spawnGateway(await writeConfig(dir, cfg));
  const client = Deno.createHttpClient({ caCerts: [ca.certPem] });
  try {
    assert.match(gw.url, /^https:/);
    const report = await (await fetch(`${gw.url}/v1/aci/attestation`, { client })).json();
    assert.deepEqual(
      report.attestation.workload_keyset.tls_public_keys.map((k: { spki_sha256: string }) =>
        k.spki_sha256
      ),
      [
        cert.spkiSha256,
      ],
    );
  } finally {
    client.close();
    await gw.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
