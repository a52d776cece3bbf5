/**
 * The build manifest (`dist/manifest.json`) and the pure parts of the build:
 * hashing given bytes, the source digest, reading a manifest back into the
 * ACI `source_provenance`, and recognising a denort download failure in
 * `deno compile`'s stderr. No I/O here; `build.ts` does the side effects.
 */

import { createHash } from "node:crypto";
import { z } from "zod";
import type { SourceProvenance } from "../src/attestation/mod.ts";

export const MANIFEST_FORMAT = "aci-gateway-build-manifest/1";

/** Lowercase hex SHA-256 of the bytes. */
export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** Lowercase hex SHA-384 of the bytes. */
export function sha384Hex(bytes: Uint8Array | string): string {
  return createHash("sha384").update(bytes).digest("hex");
}

const HEX64 = /^[0-9a-f]{64}$/;
const HEX96 = /^[0-9a-f]{96}$/;
const COMMIT = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
/** An OCI content digest. */
const IMAGE_DIGEST = /^(sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96}|sha512:[0-9a-f]{128})$/;

export interface SourceFile {
  /** Path relative to the project root, `/`-separated. */
  path: string;
  sha256: string;
}

function compareBytes(a: string, b: string): number {
  // Byte order of the UTF-8 paths, as `LC_ALL=C sort` does.
  const ea = new TextEncoder().encode(a);
  const eb = new TextEncoder().encode(b);
  for (let i = 0; i < Math.min(ea.length, eb.length); i++) {
    if (ea[i] !== eb[i]) return ea[i] - eb[i];
  }
  return ea.length - eb.length;
}

/** The files sorted by path (byte order), rejecting duplicates and malformed entries. */
export function sortSourceFiles(files: readonly SourceFile[]): SourceFile[] {
  const sorted = [...files].sort((a, b) => compareBytes(a.path, b.path));
  sorted.forEach((f, i) => {
    if (f.path === "" || /[\n\r]/.test(f.path) || f.path.startsWith("/")) {
      throw new Error(`bad source path ${JSON.stringify(f.path)}`);
    }
    if (!HEX64.test(f.sha256)) throw new Error(`bad sha256 for ${f.path}`);
    if (i > 0 && sorted[i - 1].path === f.path) throw new Error(`duplicate source path ${f.path}`);
  });
  return sorted;
}

/**
 * `sha256:` + SHA-256 over the `sha256sum` listing of the sorted files
 * (`<hex>  <path>\n` per file), so a reproducer can recompute it with
 * `git ls-files -co --exclude-standard | LC_ALL=C sort | xargs sha256sum | sha256sum`.
 */
export function sourceDigest(files: readonly SourceFile[]): string {
  const listing = sortSourceFiles(files).map((f) => `${f.sha256}  ${f.path}\n`).join("");
  return `sha256:${sha256Hex(listing)}`;
}

const sourceFileSchema = z.strictObject({
  path: z.string().min(1),
  sha256: z.string().regex(HEX64),
});

const artifactSchema = z.strictObject({
  path: z.string().min(1),
  size: z.number().int().nonnegative(),
  sha256: z.string().regex(HEX64),
  sha384: z.string().regex(HEX96),
});

/**
 * The fallback where `deno compile` cannot get its runtime: one JavaScript
 * file from `deno bundle --platform deno` and the exact Deno executable that
 * runs it; both are measured, and `run` is how they are started.
 */
const bundleSchema = z.strictObject({
  script: artifactSchema,
  runtime: artifactSchema,
});

export const manifestSchema = z.strictObject({
  format: z.literal(MANIFEST_FORMAT),
  kind: z.enum(["binary", "bundle", "source-only"]),
  /** The compiled binary; null for a bundle or source-only manifest. */
  artifact: artifactSchema.nullable(),
  /** The bundle and its runtime; null unless `kind` is `bundle`. */
  bundle: bundleSchema.nullable().default(null),
  /**
   * The command line that starts the measured artifact with its permissions,
   * run in the manifest's directory (append `serve --config FILE`); null for
   * source-only.
   */
  run: z.array(z.string().min(1)).min(1).nullable().default(null),
  /** Why there is no binary (one line), null when built. */
  build_failure: z.string().nullable(),
  source: z.strictObject({
    commit: z.string().regex(COMMIT).nullable(),
    /** Uncommitted changes were present; null when unknown (no git). */
    dirty: z.boolean().nullable(),
    /** How the file list was made: `git ls-files -co --exclude-standard`, or a directory walk. */
    listing: z.enum(["git", "walk"]),
    digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
    files: z.array(sourceFileSchema),
  }),
  deno_version: z.string().min(1),
  deno_lock_sha256: z.string().regex(HEX64).nullable(),
  compile: z.strictObject({
    entry: z.string().min(1),
    /** The exact `deno compile` arguments (permissions baked into the binary). */
    args: z.array(z.string()),
    /** `download` = fetched from dl.deno.land by deno; `DENORT_BIN` = a local runtime. */
    denort: z.enum(["download", "DENORT_BIN"]),
    denort_sha256: z.string().regex(HEX64).nullable(),
  }),
  repo_url: z.string().min(1).nullable(),
  /** The commit the binary was built from: null when the tree was dirty or unknown. */
  repo_commit: z.string().regex(COMMIT).nullable(),
  image_digest: z.string().regex(IMAGE_DIGEST).nullable(),
  /** Where the image's build provenance (e.g. a SLSA attestation) can be fetched. */
  image_provenance_url: z.string().min(1).nullable(),
});

export type BuildManifest = z.infer<typeof manifestSchema>;
export type Artifact = z.infer<typeof artifactSchema>;

export interface ManifestInput {
  artifact: { path: string; bytes: Uint8Array } | null;
  /** The bundle pair, when built instead of a binary (then `buildFailure` says why). */
  bundle?: {
    script: { path: string; bytes: Uint8Array };
    runtime: { path: string; bytes: Uint8Array };
  } | null;
  /** The command line starting the artifact (binary or bundle), from the manifest's directory. */
  run?: readonly string[] | null;
  buildFailure: string | null;
  commit: string | null;
  dirty: boolean | null;
  listing: "git" | "walk";
  files: readonly SourceFile[];
  denoVersion: string;
  denoLock: Uint8Array | null;
  entry: string;
  compileArgs: readonly string[];
  /** Set when DENORT_BIN was given: its bytes, or null when the path did not exist. */
  denortBin: { bytes: Uint8Array | null } | null;
  repoUrl: string | null;
  imageDigest: string | null;
  imageProvenanceUrl: string | null;
}

function artifactOf(a: { path: string; bytes: Uint8Array }): Artifact {
  return {
    path: a.path,
    size: a.bytes.length,
    sha256: sha256Hex(a.bytes),
    sha384: sha384Hex(a.bytes),
  };
}

/** The manifest for a build; `kind` follows from whether a binary or bundle exists. */
export function buildManifest(input: ManifestInput): BuildManifest {
  if ((input.artifact === null) === (input.buildFailure === null)) {
    throw new Error("a manifest has either an artifact or a build failure, not both or neither");
  }
  const bundle = input.bundle ?? null;
  if (input.artifact !== null && bundle !== null) {
    throw new Error("a manifest has a binary or a bundle, not both");
  }
  const run = input.run ?? null;
  if ((run === null) !== (input.artifact === null && bundle === null)) {
    throw new Error("a built artifact needs its run command line, and only a built one");
  }
  const files = sortSourceFiles(input.files);
  const manifest: BuildManifest = {
    format: MANIFEST_FORMAT,
    kind: input.artifact !== null ? "binary" : bundle !== null ? "bundle" : "source-only",
    artifact: input.artifact === null ? null : artifactOf(input.artifact),
    bundle: bundle === null
      ? null
      : { script: artifactOf(bundle.script), runtime: artifactOf(bundle.runtime) },
    run: run === null ? null : [...run],
    build_failure: input.buildFailure,
    source: {
      commit: input.commit,
      dirty: input.dirty,
      listing: input.listing,
      digest: sourceDigest(files),
      files,
    },
    deno_version: input.denoVersion,
    deno_lock_sha256: input.denoLock === null ? null : sha256Hex(input.denoLock),
    compile: {
      entry: input.entry,
      args: [...input.compileArgs],
      denort: input.denortBin === null ? "download" : "DENORT_BIN",
      denort_sha256: input.denortBin?.bytes ? sha256Hex(input.denortBin.bytes) : null,
    },
    repo_url: input.repoUrl,
    // A dirty tree was not built from HEAD: claiming that commit would mislead a verifier.
    repo_commit: input.dirty === false ? input.commit : null,
    image_digest: input.imageDigest,
    image_provenance_url: input.imageProvenanceUrl,
  };
  // Validate what we emit with the same schema readers use.
  return manifestSchema.parse(manifest);
}

/** A manifest read back (e.g. from JSON); throws with the bad field's path. */
export function parseManifest(value: unknown): BuildManifest {
  const result = manifestSchema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new Error(
      `invalid build manifest at ${issue.path.join(".") || "(root)"}: ${issue.message}`,
    );
  }
  return result.data;
}

// The report's side of provenance lives with the reports (src/attestation/).
export type { ImageProvenance, SourceProvenance } from "../src/attestation/mod.ts";

/**
 * The gateway's `source_provenance`, from a parsed manifest JSON value; null
 * when the value is not a valid manifest (the report then says "unknown").
 */
export function sourceProvenanceFromManifest(manifest: unknown): SourceProvenance | null {
  const parsed = manifestSchema.safeParse(manifest);
  if (!parsed.success) return null;
  const m = parsed.data;
  return {
    repo_url: m.repo_url,
    repo_commit: m.repo_commit,
    image_digest: m.image_digest,
    image_provenance: {
      manifest_format: m.format,
      kind: m.kind,
      binary_sha256: m.artifact?.sha256 ?? null,
      binary_sha384: m.artifact?.sha384 ?? null,
      bundle_sha256: m.bundle?.script.sha256 ?? null,
      runtime_sha256: m.bundle?.runtime.sha256 ?? null,
      run: m.run,
      source_digest: m.source.digest,
      source_commit: m.source.commit,
      source_dirty: m.source.dirty,
      deno_version: m.deno_version,
      deno_lock_sha256: m.deno_lock_sha256,
      attestation_url: m.image_provenance_url,
    },
  };
}

/** Why `deno compile` could not get its runtime. */
export type DenortFailure =
  | { reason: "download_failed"; url: string | null }
  | { reason: "denort_bin_missing"; path: string };

function stripAnsi(text: string): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/\x1b\[[0-9;]*m/g, "");
}

/**
 * Recognises the denort failure in `deno compile` stderr. Deno 2.9 prints
 * "Setting up base binary." followed by the download error (dns, connect,
 * timeout, TLS, HTTP status) for the `dl.deno.land/…/denort-….zip` URL, or
 * "Could not find denort at '<path>'" for a bad DENORT_BIN. Anything else
 * (type errors, missing modules) is not a denort failure.
 */
export function detectDenortFailure(stderr: string): DenortFailure | null {
  const text = stripAnsi(stderr);
  const missing = text.match(/Could not find denort at '([^']*)'/);
  if (missing) return { reason: "denort_bin_missing", path: missing[1] };
  const url = text.match(/https?:\/\/\S*denort-[^\s)]*/)?.[0] ?? null;
  const settingUp = /Setting up base binary/.test(text);
  const networkError =
    /error sending request|dns error|failed to lookup address|Connect\b|connection refused|timed out|Network is unreachable|certificate|Download could not be found|status(?: code)? [45]\d\d|Failed downloading/i
      .test(text);
  if ((settingUp || url !== null) && networkError) return { reason: "download_failed", url };
  return null;
}

/** The one line printed for a denort failure. */
export function denortFailureLine(
  failure: DenortFailure,
  denoVersion: string,
  manifestPath = "dist/manifest.json",
): string {
  if (failure.reason === "denort_bin_missing") {
    return `deno compile: DENORT_BIN points to '${failure.path}', which does not exist; ` +
      `set DENORT_BIN to a local denort binary of Deno ${denoVersion} for this target ` +
      `(${manifestPath} was written as source-only).`;
  }
  return `deno compile needs the denort runtime, which it downloads from the internet ` +
    `(${failure.url ?? "dl.deno.land"}) and this machine cannot reach; for an offline build ` +
    `set DENORT_BIN to a locally available denort binary of Deno ${denoVersion} ` +
    `(${manifestPath} was written as source-only).`;
}
