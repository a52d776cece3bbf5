/**
 * Receipts from before a restart verify: a receipt made by one gateway
 * process, checked after the process restarted with a new keyset, with
 * `task verify --report <current URL>` — which finds the receipt's archived
 * keyset itself, says which it used, checks the receipt's inclusion and
 * shows the checkpoint. And the offline evidence bundle: served, checked by
 * `task verify --bundle` with no gateway running, and refused when altered.
 */
import assert from "node:assert/strict";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/keys/keys.ts";
import { NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";
import { runToEnd, taskArgs } from "./support/task_line.ts";
import { waitInclusion } from "./support/tlog_check.ts";

async function verify(args: string[], apiKey?: string) {
  return await runToEnd(Deno.execPath(), [...await taskArgs("verify"), ...args], {
    env: apiKey ? { GATEWAY_API_KEY: apiKey } : {},
    timeoutMs: 120_000,
  });
}

Deno.test("after a restart: task verify finds the archived keyset, checks inclusion; bundles verify offline", async () => {
  const dir = await Deno.makeTempDir();
  const storePath = `${dir}/gw.kv`;
  const upstream = await startDemoUpstream({ name: "plain" });
  const cfg = await writeConfig(dir, baseConfig({ upstreamUrl: upstream.url, storePath }));
  const kv = await Deno.openKv(storePath);
  let gw = await spawnGateway(cfg);
  try {
    const { key } = await createKey(kv, {
      tier: "enterprise",
      now: Date.now,
      creditsNano: 10n * NANO_PER_CREDIT,
    });
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "demo/echo",
        messages: [{ role: "user", content: "keep me" }],
      }),
    });
    assert.equal(res.status, 200);
    await res.text();
    const id = res.headers.get("x-receipt-id")!;
    await waitInclusion(gw.url, id, key);
    const oldDigest = res.headers.get("x-aci-keyset-digest");

    await gw.stop();
    gw = await spawnGateway(cfg);
    const current = await (await fetch(`${gw.url}/v1/aci/attestation`)).json();
    assert.notEqual(current.workload_keyset_digest, oldDigest, "a restart makes a new keyset");

    const out = await verify([
      "--receipt",
      `${gw.url}/v1/aci/receipts/${id}`,
      "--report",
      `${gw.url}/v1/aci/attestation`,
      "--allow-dev",
    ], key);
    const text = out.stdout.join("\n");
    assert.equal(out.code, 0, text);
    assert.match(text, new RegExp(`signed by keyset ${oldDigest}, not the current`));
    assert.match(text, /PASS receipt\.signature/);
    assert.match(
      text,
      /PASS log\.checkpoint — checkpoint localhost\/v1\/aci\/log size \d+ root \S+, signed by/,
    );
    assert.match(text, /PASS log\.inclusion — receipt digest is leaf \d+/);

    // The bundle, then offline: the gateway is stopped before it is checked.
    const bundleRes = await fetch(`${gw.url}/v1/aci/receipts/${id}/bundle`, {
      headers: { authorization: `Bearer ${key}` },
    });
    assert.equal(bundleRes.status, 200);
    const bundle = await bundleRes.json();
    assert.equal(bundle.format, "aci-evidence-bundle/1");
    assert.equal(bundle.report.workload_keyset_digest, oldDigest);
    assert.ok(bundle.log.checkpoint_keysets.length >= 1);
    assert.equal((await fetch(`${gw.url}/v1/aci/receipts/${id}/bundle`)).status, 401);
    await gw.stop();
    const file = `${dir}/receipt.aci-bundle.json`;
    await Deno.writeTextFile(file, JSON.stringify(bundle));
    const offline = await verify(["--bundle", file, "--allow-dev"]);
    const offlineText = offline.stdout.join("\n");
    assert.equal(offline.code, 0, offlineText);
    assert.match(offlineText, /PASS log\.inclusion/);
    assert.match(offlineText, /PASS log\.checkpoint_keyset_inclusion/);
    assert.match(offlineText, /PASS receipt\.signature/);
    // Years later: judged at a time after the keyset lapsed, the report's validity fails.
    const late = await verify(["--bundle", file, "--allow-dev", "--at", "2100-01-01T00:00:00Z"]);
    assert.equal(late.code, 1);
    // An altered receipt or proof fails.
    const altered = structuredClone(bundle);
    altered.receipt.model = "someone/else";
    await Deno.writeTextFile(file, JSON.stringify(altered));
    const bad = await verify(["--bundle", file, "--allow-dev"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stdout.join("\n"), /FAIL log\.inclusion/);
    const badProof = structuredClone(bundle);
    badProof.log.leaf_index = bundle.log.leaf_index + 1;
    await Deno.writeTextFile(file, JSON.stringify(badProof));
    assert.equal((await verify(["--bundle", file, "--allow-dev"])).code, 1);
    // Without --allow-dev the development report is not accepted.
    await Deno.writeTextFile(file, JSON.stringify(bundle));
    assert.equal((await verify(["--bundle", file])).code, 1);
    gw = await spawnGateway(cfg);
  } finally {
    await gw.stop().catch(() => {});
    kv.close();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});
