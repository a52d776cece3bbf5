import assert from "node:assert/strict";
import {
  compileArgs,
  DEFAULT_WRITE_PATHS,
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
  assert.deepEqual(o.writePaths, [...DEFAULT_WRITE_PATHS]);
});

Deno.test("parseBuildArgs: both flag forms; write paths replace the defaults", () => {
  const digest = `sha256:${"0f".repeat(32)}`;
  const o = parseBuildArgs([
    "--repo-url",
    "https://github.com/example/gw",
    `--image-digest=${digest}`,
    "--write-path=/data/kv",
    "--write-path",
    "/sys/kernel/config/tsm/report",
    "--include",
    "config/dev.json",
  ]);
  assert.equal(o.repoUrl, "https://github.com/example/gw");
  assert.equal(o.imageDigest, digest);
  assert.deepEqual(o.writePaths, ["/data/kv", "/sys/kernel/config/tsm/report"]);
  assert.deepEqual(o.includes, ["config/dev.json"]);
});

Deno.test("parseBuildArgs: bad values are rejected, not adjusted", () => {
  assert.throws(() => parseBuildArgs(["--image-digest", "latest"]), /OCI digest/);
  assert.throws(() => parseBuildArgs(["--image-digest", `sha256:${"AB".repeat(32)}`]), /OCI/);
  assert.throws(() => parseBuildArgs(["--write-path", "data"]), /absolute/);
  assert.throws(() => parseBuildArgs(["--repo-url"]), /needs a value/);
  assert.throws(() => parseBuildArgs(["--repo-url", "--entry", "x"]), /needs a value/);
  assert.throws(() => parseBuildArgs(["--bogus", "1"]), /unknown option --bogus/);
});

Deno.test("compileArgs: narrow permissions baked in, entry last", () => {
  const a = compileArgs({
    entry: "main.ts",
    output: "dist/gateway",
    writePaths: ["/sys/kernel/config/tsm/report", "/var/lib/gateway"],
    includes: ["config/dev.json"],
    target: null,
  });
  assert.equal(a[0], "compile");
  for (const f of ["--allow-net", "--allow-read", "--allow-env", "--allow-sys", "--unstable-kv"]) {
    assert.ok(a.includes(f), f);
  }
  assert.ok(a.includes("--allow-write=/sys/kernel/config/tsm/report,/var/lib/gateway"));
  assert.ok(!a.includes("--allow-write"), "write access must be restricted");
  assert.ok(!a.some((x) => x.startsWith("--allow-run") || x.startsWith("--allow-all")));
  assert.ok(a.includes("--include=config/dev.json"));
  assert.ok(a.includes(`--v8-flags=${GATEWAY_V8_FLAGS.join(",")}`));
  assert.deepEqual(a.slice(-3), ["--output", "dist/gateway", "main.ts"]);
  assert.throws(() =>
    compileArgs({ ...{ entry: "m", output: "o", includes: [], target: null }, writePaths: [] })
  );
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
