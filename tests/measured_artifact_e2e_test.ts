/**
 * The measured artifact (#20 item 13): `deno task compile` in a clean clone
 * builds the compiled binary or, where `deno compile` cannot get its runtime
 * (this machine is offline), the pair `gateway.js` (deno bundle) + `deno`
 * (the exact runtime). The gateway started with the manifest's recorded
 * command line reports provenance matching the files' own digests.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { parseManifest } from "../enclave/manifest.ts";
import { bundleArgs } from "../enclave/build_args.ts";
import { baseConfig, writeConfig } from "./support/process.ts";
import { ROOT, runToEnd, spawnListening, taskArgs } from "./support/task_line.ts";

const sha256File = async (path: string) =>
  createHash("sha256").update(await Deno.readFile(path)).digest("hex");

Deno.test("task compile in a clean clone: the artifact runs with its recorded command line and reports its own digests", async () => {
  const dir = await Deno.makeTempDir({ prefix: "measured-" });
  const clone = `${dir}/clone`;
  try {
    const cloned = await runToEnd("git", ["clone", "-q", ROOT, clone]);
    assert.equal(cloned.code, 0, cloned.stderr.join("\n"));
    const head = (await runToEnd("git", ["rev-parse", "HEAD"], { cwd: clone })).stdout[0];
    const built = await runToEnd(Deno.execPath(), await taskArgs("compile", clone), {
      cwd: clone,
      timeoutMs: 180_000,
    });
    assert.equal(built.code, 0, built.stderr.join("\n"));
    const manifest = parseManifest(
      JSON.parse(await Deno.readTextFile(`${clone}/dist/manifest.json`)),
    );
    assert.ok(manifest.run !== null);
    assert.equal(manifest.repo_commit, head);
    assert.equal(manifest.source.dirty, false);
    assert.equal(manifest.deno_lock_sha256, await sha256File(`${clone}/deno.lock`));
    assert.ok(manifest.run.includes("--allow-all") || manifest.kind === "binary");
    // The files the manifest names are the files on disk.
    const files = manifest.kind === "bundle"
      ? [manifest.bundle!.script, manifest.bundle!.runtime]
      : [manifest.artifact!];
    for (const f of files) assert.equal(await sha256File(`${clone}/${f.path}`), f.sha256, f.path);
    if (manifest.kind === "bundle") {
      assert.equal(manifest.bundle!.runtime.sha256, await sha256File(Deno.execPath()));
      assert.match(built.stdout.join("\n"), /gateway\.js sha256=[0-9a-f]{64}/);
      // A reproducer gets the same bundle bytes from the same commit and Deno.
      const again = await runToEnd(Deno.execPath(), [
        ...bundleArgs({ entry: "main.ts", output: `${dir}/again.js` }),
      ], { cwd: clone });
      assert.equal(again.code, 0, again.stderr.join("\n"));
      assert.equal(await sha256File(`${dir}/again.js`), manifest.bundle!.script.sha256);
    }

    const cfg = await writeConfig(dir, {
      ...baseConfig({ upstreamUrl: "http://127.0.0.1:9", storePath: `${dir}/gw.kv` }),
      identity: {
        quote_provider: "auto",
        allow_dev_quotes: true,
        manifest_path: `${clone}/dist/manifest.json`,
      },
    });
    const [cmd, ...args] = manifest.run;
    const gw = await spawnListening(`${clone}/dist/${cmd}`, [...args, "serve", "--config", cfg], {
      cwd: `${clone}/dist`,
    });
    try {
      const r = await fetch(`${gw.url}/v1/aci/attestation`);
      assert.equal(r.status, 200);
      const sp = (await r.json()).attestation.source_provenance;
      assert.equal(sp.repo_commit, head);
      const ip = sp.image_provenance;
      assert.equal(ip.kind, manifest.kind);
      assert.deepEqual(ip.run, manifest.run);
      assert.equal(ip.deno_lock_sha256, await sha256File(`${clone}/deno.lock`));
      if (manifest.kind === "bundle") {
        assert.equal(ip.bundle_sha256, await sha256File(`${clone}/dist/gateway.js`));
        assert.equal(ip.runtime_sha256, await sha256File(`${clone}/dist/deno`));
      } else {
        assert.equal(ip.binary_sha256, await sha256File(`${clone}/dist/gateway`));
      }
    } finally {
      assert.equal((await gw.stop()).code, 0);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
