/** Two real gateway processes on one KV file share one rate limit and one credit balance. */
import assert from "node:assert/strict";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/accounts/keys.ts";
import { getBalance, getUsage, NANO_PER_CREDIT } from "../src/accounts/credits.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";

Deno.test("two gateway processes share one rate limit and one balance; SIGTERM exits 0", async () => {
  const dir = await Deno.makeTempDir();
  const upstream = await startDemoUpstream({ name: "plain" });
  const storePath = `${dir}/gw.kv`;
  const cfg = await writeConfig(dir, baseConfig({ upstreamUrl: upstream.url, storePath }));
  const a = await spawnGateway(cfg);
  const b = await spawnGateway(cfg);
  const kv = await Deno.openKv(storePath);
  try {
    const { key, record } = await createKey(kv, {
      tier: "enterprise",
      rpm: 10,
      tpm: 1_000_000,
      now: Date.now,
      creditsNano: 1n * NANO_PER_CREDIT,
    });
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
  } finally {
    kv.close();
    const sa = await a.stop("SIGTERM");
    const sb = await b.stop("SIGTERM");
    await upstream.close();
    assert.equal(sa.code, 0);
    assert.equal(sb.code, 0);
    await Deno.remove(dir, { recursive: true });
  }
});
