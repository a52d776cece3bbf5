/**
 * A newcomer's path (#31 section 4): what a user trying the README's commands
 * meets — `task start --port`, an ignored `gateway.json`, a store nobody else
 * can read.
 */
import assert from "node:assert/strict";
import { baseConfig, writeConfig } from "./support/process.ts";
import { ROOT, runToEnd, spawnListening, taskArgs } from "./support/task_line.ts";

const START = await taskArgs("start");
const KEYS = await taskArgs("keys");

Deno.test("gateway.json (the README's production file) is git-ignored", async () => {
  const out = await new Deno.Command("git", {
    args: ["check-ignore", "--no-index", "-q", "gateway.json"],
    cwd: ROOT,
  }).output();
  assert.equal(out.code, 0, "git check-ignore gateway.json");
});

Deno.test("task start takes --port, which wins over the configured port", async () => {
  const dir = await Deno.makeTempDir();
  const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (held.addr as Deno.NetAddr).port;
  held.close();
  try {
    const cfg = await writeConfig(dir, {
      ...baseConfig({ upstreamUrl: "http://127.0.0.1:9", storePath: `${dir}/gw.kv` }),
      listen: { base: { hostname: "127.0.0.1", port: 1 } },
    });
    const gw = await spawnListening(Deno.execPath(), [
      ...START,
      "--config",
      cfg,
      "--port",
      String(port),
    ]);
    try {
      assert.equal(gw.url, `http://127.0.0.1:${port}`);
      assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
    } finally {
      assert.equal((await gw.stop()).code, 0);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a local KV store (and its WAL) is created owner-only, in an owner-only directory", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const store = `${dir}/state/gw.kv`;
    const cfg = await writeConfig(
      dir,
      baseConfig({ upstreamUrl: "http://127.0.0.1:9", storePath: store }),
    );
    const out = await runToEnd(Deno.execPath(), [
      ...KEYS,
      "--config",
      cfg,
      "create",
      "--tier",
      "free",
    ]);
    assert.equal(out.code, 0, out.stderr.join("\n"));
    assert.equal((await Deno.stat(`${dir}/state`)).mode! & 0o777, 0o700);
    let files = 0;
    for await (const e of Deno.readDir(`${dir}/state`)) {
      const mode = (await Deno.stat(`${dir}/state/${e.name}`)).mode! & 0o777;
      assert.equal(mode & 0o077, 0, `${e.name} has mode ${mode.toString(8)}`);
      files++;
    }
    assert.ok(files >= 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("--rpm/--tpm are enterprise-only: the README says so and the CLI refuses them elsewhere", async () => {
  const readme = await Deno.readTextFile(`${ROOT}README.md`);
  assert.match(readme, /`--rpm` \/ `--tpm` .* `enterprise` tier\s+only/);
  const dir = await Deno.makeTempDir();
  try {
    const cfg = await writeConfig(
      dir,
      baseConfig({ upstreamUrl: "http://127.0.0.1:9", storePath: `${dir}/gw.kv` }),
    );
    const pro = await runToEnd(Deno.execPath(), [
      ...KEYS,
      "--config",
      cfg,
      "create",
      "--tier",
      "pro",
      "--rpm",
      "10",
      "--tpm",
      "1000",
    ]);
    assert.notEqual(pro.code, 0);
    assert.match(pro.stderr.join("\n") + pro.stdout.join("\n"), /only for enterprise keys/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
