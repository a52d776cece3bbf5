import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  buildManifest,
  denortFailureLine,
  detectDenortFailure,
  MANIFEST_FORMAT,
  type ManifestInput,
  parseManifest,
  sha256Hex,
  sha384Hex,
  sourceDigest,
  sourceProvenanceFromManifest,
} from "./manifest.ts";

const enc = new TextEncoder();
const COMMIT = "a14c171afc1a14622222df3990e1fc5fd7f33825";

function input(overrides: Partial<ManifestInput> = {}): ManifestInput {
  const base: ManifestInput = {
    artifact: { path: "dist/gateway", bytes: enc.encode("ELF binary bytes") },
    buildFailure: null,
    commit: COMMIT,
    dirty: false,
    listing: "git",
    files: [
      { path: "src/b.ts", sha256: sha256Hex("b") },
      { path: "main.ts", sha256: sha256Hex("main") },
    ],
    denoVersion: "2.9.6",
    denoLock: enc.encode('{"version":"5"}'),
    entry: "main.ts",
    compileArgs: ["compile", "--output", "dist/gateway", "main.ts"],
    denortBin: null,
    repoUrl: "https://github.com/example/gateway",
    imageDigest: `sha256:${"ab".repeat(32)}`,
    imageProvenanceUrl: null,
    ...overrides,
  };
  const built = base.artifact !== null || (base.bundle ?? null) !== null;
  return { run: built ? ["./gateway"] : null, ...base };
}

// Captured from `deno task compile` on an offline machine (Deno 2.9.6; checkout path replaced).
const OFFLINE_STDERR = `Check main.ts
Compile main.ts to gateway
Download https://dl.deno.land/release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip
error: Writing deno compile executable to temporary file '/src/gateway/dist/gateway.tmp-d71907b8c9db9db7'

Caused by:
    0: Setting up base binary.
    1: error sending request for url (https://dl.deno.land/release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip): client error (Connect): dns error: failed to lookup address information: Name or service not known
    2: client error (Connect)
    3: dns error
    4: failed to lookup address information: Name or service not known

Stack backtrace:
   0: <unknown>
`;

const MISSING_DENORT_STDERR = `\x1b[0m\x1b[32mCompile\x1b[0m m.ts to out
\x1b[0m\x1b[1m\x1b[31merror\x1b[0m: Writing deno compile executable to temporary file '/tmp/out.tmp-fe9f9da70ec09207'

Caused by:
    0: Could not find denort at '/nonexistent/denort'
    1: No such file or directory (os error 2)
`;

const TYPE_ERROR_STDERR = `TS7006 [ERROR]: Parameter 'p' implicitly has an 'any' type.
    readFile: (p) => Deno.readFile(p),
    at file:///src/gateway/main.ts:149:16

error: Type checking failed.
`;

Deno.test("hashes match node:crypto over the given bytes", () => {
  assert.equal(sha256Hex("abc"), createHash("sha256").update("abc").digest("hex"));
  assert.equal(
    sha384Hex(enc.encode("abc")),
    "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
  );
});

Deno.test("source digest = sha256 of the sha256sum listing in byte order", () => {
  const files = [
    { path: "src/z.ts", sha256: sha256Hex("z") },
    { path: "Z.md", sha256: sha256Hex("Z") },
    { path: "main.ts", sha256: sha256Hex("m") },
  ];
  const listing = `${sha256Hex("Z")}  Z.md\n${sha256Hex("m")}  main.ts\n${
    sha256Hex("z")
  }  src/z.ts\n`;
  assert.equal(sourceDigest(files), `sha256:${sha256Hex(listing)}`);
  assert.equal(sourceDigest([...files].reverse()), sourceDigest(files));
  assert.notEqual(
    sourceDigest([{ ...files[0], sha256: sha256Hex("changed") }, files[1], files[2]]),
    sourceDigest(files),
  );
  assert.throws(() => sourceDigest([files[0], files[0]]), /duplicate/);
  assert.throws(() => sourceDigest([{ path: "a\nb", sha256: sha256Hex("") }]), /bad source path/);
  assert.throws(() => sourceDigest([{ path: "a", sha256: "XYZ" }]), /bad sha256/);
});

Deno.test("binary manifest carries artifact hashes and provenance", () => {
  const m = buildManifest(input());
  assert.equal(m.format, MANIFEST_FORMAT);
  assert.equal(m.kind, "binary");
  assert.equal(m.artifact?.sha256, sha256Hex("ELF binary bytes"));
  assert.equal(m.artifact?.sha384, sha384Hex("ELF binary bytes"));
  assert.equal(m.artifact?.size, 16);
  assert.deepEqual(m.source.files.map((f) => f.path), ["main.ts", "src/b.ts"]);
  assert.equal(m.source.digest, sourceDigest(input().files));
  assert.equal(m.deno_lock_sha256, sha256Hex('{"version":"5"}'));
  assert.equal(m.repo_commit, COMMIT);
  assert.equal(m.compile.denort, "download");
  // Round-trips through JSON and the reader's schema.
  assert.deepEqual(parseManifest(JSON.parse(JSON.stringify(m))), m);
});

Deno.test("source-only manifest: no artifact, failure recorded", () => {
  const m = buildManifest(input({ artifact: null, buildFailure: "denort_unavailable" }));
  assert.equal(m.kind, "source-only");
  assert.equal(m.artifact, null);
  assert.equal(m.build_failure, "denort_unavailable");
  assert.throws(() => buildManifest(input({ artifact: null })), /either an artifact/);
  assert.throws(() => buildManifest(input({ buildFailure: "x" })), /either an artifact/);
});

Deno.test("a dirty or unknown tree gives no repo_commit; DENORT_BIN is hashed", () => {
  assert.equal(buildManifest(input({ dirty: true })).repo_commit, null);
  assert.equal(buildManifest(input({ dirty: null })).repo_commit, null);
  const m = buildManifest(input({ denortBin: { bytes: enc.encode("denort") } }));
  assert.equal(m.compile.denort, "DENORT_BIN");
  assert.equal(m.compile.denort_sha256, sha256Hex("denort"));
  const missing = buildManifest(input({ denortBin: { bytes: null } }));
  assert.equal(missing.compile.denort, "DENORT_BIN");
  assert.equal(missing.compile.denort_sha256, null);
});

Deno.test("sourceProvenanceFromManifest fills the ACI source_provenance", () => {
  const m = buildManifest(input({ imageProvenanceUrl: "https://example.com/slsa.json" }));
  const p = sourceProvenanceFromManifest(JSON.parse(JSON.stringify(m)));
  assert.ok(p !== null);
  assert.deepEqual(Object.keys(p).sort(), [
    "image_digest",
    "image_provenance",
    "repo_commit",
    "repo_url",
  ]);
  assert.equal(p.repo_url, "https://github.com/example/gateway");
  assert.equal(p.repo_commit, COMMIT);
  assert.equal(p.image_digest, `sha256:${"ab".repeat(32)}`);
  assert.equal(p.image_provenance.binary_sha384, sha384Hex("ELF binary bytes"));
  assert.equal(p.image_provenance.source_digest, m.source.digest);
  assert.equal(p.image_provenance.attestation_url, "https://example.com/slsa.json");
  const sourceOnly = sourceProvenanceFromManifest(
    buildManifest(input({ artifact: null, buildFailure: "x", repoUrl: null, imageDigest: null })),
  );
  assert.equal(sourceOnly?.image_provenance.binary_sha256, null);
  assert.equal(sourceOnly?.repo_url, null);
});

Deno.test("bundle manifest: both files measured, run line recorded, provenance reports them", () => {
  const run = ["./deno", "run", "--allow-all", "./gateway.js"];
  const m = buildManifest(input({
    artifact: null,
    buildFailure: "denort_unavailable: download failed (offline); built the bundle pair",
    bundle: {
      script: { path: "dist/gateway.js", bytes: enc.encode("bundle js") },
      runtime: { path: "dist/deno", bytes: enc.encode("deno elf") },
    },
    run,
  }));
  assert.equal(m.kind, "bundle");
  assert.equal(m.bundle?.script.sha256, sha256Hex("bundle js"));
  assert.equal(m.bundle?.runtime.sha384, sha384Hex("deno elf"));
  assert.deepEqual(m.run, run);
  assert.deepEqual(parseManifest(JSON.parse(JSON.stringify(m))), m);
  const p = sourceProvenanceFromManifest(JSON.parse(JSON.stringify(m)));
  assert.equal(p?.image_provenance.kind, "bundle");
  assert.equal(p?.image_provenance.bundle_sha256, sha256Hex("bundle js"));
  assert.equal(p?.image_provenance.runtime_sha256, sha256Hex("deno elf"));
  assert.deepEqual(p?.image_provenance.run, run);
  assert.equal(p?.image_provenance.binary_sha256, null);
  assert.throws(() => buildManifest(input({ run: null })), /run command line/);
  assert.throws(
    () =>
      buildManifest(
        input({
          bundle: m.bundle &&
            {
              script: { path: "a", bytes: enc.encode("a") },
              runtime: { path: "b", bytes: enc.encode("b") },
            },
        }),
      ),
    /binary or a bundle/,
  );
});

Deno.test("sourceProvenanceFromManifest returns null for anything not a manifest", () => {
  const good = JSON.parse(JSON.stringify(buildManifest(input())));
  assert.equal(sourceProvenanceFromManifest(null), null);
  assert.equal(sourceProvenanceFromManifest("manifest"), null);
  assert.equal(sourceProvenanceFromManifest({ ...good, format: "other/1" }), null);
  assert.equal(sourceProvenanceFromManifest({ ...good, image_digest: "latest" }), null);
  assert.equal(sourceProvenanceFromManifest({ ...good, extra: 1 }), null);
  assert.throws(() => parseManifest({ ...good, repo_commit: "HEAD" }), /repo_commit/);
});

Deno.test("denort download failure is recognised in the real offline stderr", () => {
  const f = detectDenortFailure(OFFLINE_STDERR);
  assert.deepEqual(f, {
    reason: "download_failed",
    url: "https://dl.deno.land/release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip",
  });
  const line = denortFailureLine(f, "2.9.6");
  assert.equal(line.split("\n").length, 1);
  assert.match(line, /DENORT_BIN/);
  assert.match(line, /cannot reach/);
});

Deno.test("a missing DENORT_BIN is recognised, even with ANSI colours", () => {
  const f = detectDenortFailure(MISSING_DENORT_STDERR);
  assert.deepEqual(f, { reason: "denort_bin_missing", path: "/nonexistent/denort" });
  assert.match(denortFailureLine(f, "2.9.6"), /DENORT_BIN points to '\/nonexistent\/denort'/);
});

Deno.test("other compile failures are not mistaken for denort failures", () => {
  assert.equal(detectDenortFailure(TYPE_ERROR_STDERR), null);
  assert.equal(
    detectDenortFailure('error: Module not found "file:///src/gateway/main.ts".'),
    null,
  );
  assert.equal(detectDenortFailure(""), null);
});
