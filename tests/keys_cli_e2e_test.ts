/** The keys command (the dashboard stand-in) works on the running gateway's store, while it runs. */
import assert from "node:assert/strict";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";

const ROOT = new URL("../", import.meta.url).pathname;

async function keys(
  configPath: string,
  ...args: string[]
): Promise<{ code: number; lines: string[] }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "main.ts", "keys", "--config", configPath, ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
  }).output();
  return { code: out.code, lines: new TextDecoder().decode(out.stdout).trim().split("\n") };
}

Deno.test("keys create/list/show/credit/revoke round trip against a running gateway", async () => {
  const dir = await Deno.makeTempDir();
  const upstream = await startDemoUpstream({ name: "plain" });
  const cfg = await writeConfig(
    dir,
    baseConfig({ upstreamUrl: upstream.url, storePath: `${dir}/gw.kv` }),
  );
  const gw = await spawnGateway(cfg);
  try {
    const created = await keys(cfg, "create", "--tier", "free", "--credits", "2.5", "--name", "ci");
    assert.equal(created.code, 0);
    const key = created.lines.at(-1)!;
    assert.match(key, /^cgw-/);
    const keyId = created.lines.join("\n").match(/key_[0-9a-f]+/)![0];
    const call = () =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: "demo/echo", messages: [{ role: "user", content: "hi" }] }),
      }).then(async (r) => {
        await r.body?.cancel();
        return r.status;
      });
    assert.equal(await call(), 200);
    const list = await keys(cfg, "list");
    assert.equal(list.code, 0);
    assert.ok(list.lines.some((l) => l.includes(keyId)));
    assert.ok(!list.lines.join("\n").includes(key), "list never shows a key");
    const show = await keys(cfg, "show", keyId);
    assert.equal(show.code, 0);
    assert.match(show.lines.join("\n"), /free/);
    assert.equal((await keys(cfg, "credit", keyId, "1.25")).code, 0);
    assert.equal((await keys(cfg, "credit", keyId, "lots")).code, 2);
    assert.equal((await keys(cfg, "revoke", keyId)).code, 0);
    // The gateway's auth cache holds a key for at most 2 s.
    await new Promise((r) => setTimeout(r, 2100));
    assert.equal(await call(), 401);
    assert.equal((await keys(cfg, "bogus")).code, 2);
  } finally {
    await gw.stop();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});
