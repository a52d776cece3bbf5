/** The keys command (the dashboard stand-in) works on the running gateway's store, while it runs. */
import assert from "node:assert/strict";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";
import { startKvConnectServer } from "./support/kv_connect_server.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** `deno task keys`'s own command line (its permissions are part of what is tested). */
const KEYS_TASK: string[] = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)).tasks.keys
  .split(" ").slice(1);

async function keys(
  configPath: string,
  ...args: string[]
): Promise<{ code: number; lines: string[] }> {
  return await keysWith({}, configPath, ...args);
}

async function keysWith(
  env: Record<string, string>,
  configPath: string,
  ...args: string[]
): Promise<{ code: number; lines: string[] }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...KEYS_TASK, "--config", configPath, ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
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

Deno.test("keys create works on a remote store over KV Connect, and the gateway accepts the key", async () => {
  const dir = await Deno.makeTempDir();
  const upstream = await startDemoUpstream({ name: "plain" });
  const remote = startKvConnectServer();
  const env = { DENO_KV_ACCESS_TOKEN: remote.token };
  const cfg = await writeConfig(
    dir,
    baseConfig({ upstreamUrl: upstream.url, storePath: remote.url }),
  );
  const gw = await spawnGateway(cfg, [], env);
  try {
    const created = await keysWith(env, cfg, "create", "--tier", "pro", "--credits", "1");
    assert.equal(created.code, 0);
    const key = created.lines.at(-1)!;
    assert.match(key, /^cgw-/);
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "demo/echo", messages: [{ role: "user", content: "hi" }] }),
    });
    await res.body?.cancel();
    assert.equal(res.status, 200);
    // Without the access token the store refuses the command, which says so and fails.
    assert.notEqual((await keysWith({ DENO_KV_ACCESS_TOKEN: "wrong" }, cfg, "list")).code, 0);
  } finally {
    await gw.stop();
    await upstream.close();
    await remote.close();
    await Deno.remove(dir, { recursive: true });
  }
});
