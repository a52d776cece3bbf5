import assert from "node:assert/strict";
import {
  bundleRunArgs,
  compileArgs,
  GATEWAY_PERMISSIONS,
  GATEWAY_V8_FLAGS,
  parseBuildArgs,
  scanRuntimeLoads,
} from "./build_args.ts";

Deno.test("parseBuildArgs: defaults", () => {
  const o = parseBuildArgs([]);
  assert.equal(o.entry, "main.ts");
  assert.equal(o.outDir, "dist");
  assert.equal(o.repoUrl, null);
  assert.equal(o.imageDigest, null);
  assert.equal(o.artifact, "auto");
});

Deno.test("parseBuildArgs: both flag forms", () => {
  const digest = `sha256:${"0f".repeat(32)}`;
  const o = parseBuildArgs([
    "--repo-url",
    "https://github.com/example/gw",
    `--image-digest=${digest}`,
    "--artifact=bundle",
    "--include",
    "config/dev.json",
  ]);
  assert.equal(o.repoUrl, "https://github.com/example/gw");
  assert.equal(o.imageDigest, digest);
  assert.equal(o.artifact, "bundle");
  assert.deepEqual(o.includes, ["config/dev.json"]);
});

Deno.test("parseBuildArgs: bad values are rejected, not adjusted", () => {
  assert.throws(() => parseBuildArgs(["--image-digest", "latest"]), /OCI digest/);
  assert.throws(() => parseBuildArgs(["--image-digest", `sha256:${"AB".repeat(32)}`]), /OCI/);
  assert.throws(() => parseBuildArgs(["--artifact", "docker"]), /auto, binary or bundle/);
  // Write paths went with the narrow permissions: Deno reaches /sys only with --allow-all.
  assert.throws(() => parseBuildArgs(["--write-path", "/data"]), /unknown option --write-path/);
  assert.throws(() => parseBuildArgs(["--repo-url"]), /needs a value/);
  assert.throws(() => parseBuildArgs(["--repo-url", "--entry", "x"]), /needs a value/);
  assert.throws(() => parseBuildArgs(["--bogus", "1"]), /unknown option --bogus/);
});

Deno.test("compileArgs and bundleRunArgs: the same permissions the start task has, entry last", async () => {
  const a = compileArgs({
    entry: "main.ts",
    output: "dist/gateway",
    includes: ["config/dev.json"],
    target: null,
  });
  assert.equal(a[0], "compile");
  for (const f of [...GATEWAY_PERMISSIONS, "--unstable-kv", "--frozen-lockfile", "--no-prompt"]) {
    assert.ok(a.includes(f), f);
  }
  assert.ok(a.includes("--include=config/dev.json"));
  assert.ok(a.includes(`--v8-flags=${GATEWAY_V8_FLAGS.join(",")}`));
  assert.deepEqual(a.slice(-3), ["--output", "dist/gateway", "main.ts"]);
  const run = bundleRunArgs({ runtime: "deno", script: "gateway.js" });
  assert.deepEqual(run.slice(0, 2), ["./deno", "run"]);
  assert.equal(run.at(-1), "./gateway.js");
  for (const f of [...GATEWAY_PERMISSIONS, "--unstable-kv", "--no-config", "--no-lock"]) {
    assert.ok(run.includes(f), f);
  }
  const start = JSON.parse(await Deno.readTextFile(new URL("../deno.json", import.meta.url)))
    .tasks.start as string;
  for (const f of GATEWAY_PERMISSIONS) assert.ok(start.includes(` ${f} `), f);
});

Deno.test("scanRuntimeLoads finds URL loads and computed imports only", () => {
  const src = `
    const dev = new URL("../../config/dev.json", import.meta.url);
    const t = new URL('./template.html', import.meta.url);
    const abs = new URL("https://example.com/x", import.meta.url);
    type W = import("../store/group_commit.ts").KvWrite;
    const lazy = await import("./lazy.ts");
    const tpl = await import(\`./fixed.ts\`);
    const computed = await import(name);
    const templ = await import(\`./plugins/\${name}.ts\`);
  `;
  const r = scanRuntimeLoads(src);
  assert.deepEqual(r.urls, ["../../config/dev.json", "./template.html"]);
  assert.equal(r.opaqueImports, 2);
});

Deno.test("deno task start and dev run with the V8 flags the binary is compiled with", async () => {
  const tasks = JSON.parse(
    await Deno.readTextFile(new URL("../deno.json", import.meta.url)),
  ).tasks as Record<string, string>;
  const flag = `--v8-flags=${GATEWAY_V8_FLAGS.join(",")}`;
  for (const t of ["start", "dev"]) assert.ok(tasks[t].includes(` ${flag} `), t);
});
