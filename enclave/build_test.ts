import assert from "node:assert/strict";
import { parseManifest, sourceDigest } from "./manifest.ts";

const root = decodeURIComponent(new URL("..", import.meta.url).pathname);

Deno.test({
  name: "build.ts: an unusable denort gives one line, exit 1 and a source-only manifest",
  // DENORT_BIN pointing nowhere keeps deno compile off the network entirely.
  fn: async () => {
    const outDir = await Deno.makeTempDir({ prefix: "enclave-build-" });
    try {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--allow-all",
          "enclave/build.ts",
          "--entry",
          "enclave/quote_provider.ts",
          "--out-dir",
          outDir,
          "--repo-url",
          "https://github.com/example/gateway",
        ],
        cwd: root,
        env: { DENORT_BIN: `${outDir}/no-such-denort`, NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const lines = new TextDecoder().decode(out.stderr).trim().split("\n");
      // Progress lines first (#31: never silent), then the one error line.
      const progress = lines.filter((l) => l.startsWith("compile: "));
      assert.match(progress[0], /^compile: listing and hashing the sources of enclave\/quote/);
      assert.match(progress[1], /^compile: hashed \d+ files/);
      assert.match(progress[2], /^compile: deno compile enclave\/quote_provider\.ts → /);
      const stderr = lines.filter((l) => !l.startsWith("compile: ")).join("\n");
      assert.equal(out.code, 1);
      assert.equal(stderr.split("\n").length, 1, stderr);
      assert.match(stderr, /DENORT_BIN/);
      await assert.rejects(Deno.stat(`${outDir}/gateway`), Deno.errors.NotFound);
      const manifest = parseManifest(
        JSON.parse(await Deno.readTextFile(`${outDir}/manifest.json`)),
      );
      assert.equal(manifest.kind, "source-only");
      assert.equal(manifest.artifact, null);
      assert.match(manifest.build_failure ?? "", /denort_unavailable/);
      assert.equal(manifest.compile.denort, "DENORT_BIN");
      assert.equal(manifest.compile.entry, "enclave/quote_provider.ts");
      assert.equal(manifest.repo_url, "https://github.com/example/gateway");
      assert.equal(manifest.deno_version, Deno.version.deno);
      assert.equal(manifest.source.digest, sourceDigest(manifest.source.files));
      assert.ok(manifest.source.files.some((f) => f.path === "enclave/build.ts"));
      assert.ok(manifest.compile.args.includes("--unstable-kv"));
    } finally {
      await Deno.remove(outDir, { recursive: true });
    }
  },
});
