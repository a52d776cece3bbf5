/**
 * Pure helpers of `build.ts`: its command-line options, the exact
 * `deno compile` arguments (the permissions baked into the binary), and the
 * scan for files the gateway loads at run time, which must be `--include`d.
 */

import { DEFAULT_TSM_ROOT } from "./configfs_tsm.ts";

/** Where the compiled gateway may write by default: configfs-tsm and its data directory. */
export const DEFAULT_WRITE_PATHS: readonly string[] = [DEFAULT_TSM_ROOT, "/var/lib/gateway"];

export interface BuildOptions {
  entry: string;
  outDir: string;
  repoUrl: string | null;
  imageDigest: string | null;
  imageProvenanceUrl: string | null;
  /** Absolute paths the binary may write (KV store directory, configfs-tsm). */
  writePaths: string[];
  /** Extra `--include` values, beyond the scanned ones. */
  includes: string[];
  target: string | null;
}

export const BUILD_USAGE =
  "usage: deno task compile [--repo-url URL] [--image-digest sha256:HEX] " +
  "[--image-provenance URL] [--write-path /abs/path]... [--include PATH]... [--target TRIPLE] " +
  "[--entry main.ts] [--out-dir dist]";

const IMAGE_DIGEST = /^(sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96}|sha512:[0-9a-f]{128})$/;

/** Parses `build.ts` arguments (`--flag value` or `--flag=value`); throws on anything unknown. */
export function parseBuildArgs(args: readonly string[]): BuildOptions {
  const opts: BuildOptions = {
    entry: "main.ts",
    outDir: "dist",
    repoUrl: null,
    imageDigest: null,
    imageProvenanceUrl: null,
    writePaths: [],
    includes: [],
    target: null,
  };
  let writePathsGiven = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const eq = arg.indexOf("=");
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    let value: string;
    if (eq > 0) {
      value = arg.slice(eq + 1);
    } else {
      const next = args[i + 1];
      if (next === undefined || next.startsWith("--")) throw new Error(`${flag} needs a value`);
      value = next;
      i++;
    }
    if (value === "") throw new Error(`${flag} needs a non-empty value`);
    switch (flag) {
      case "--repo-url":
        if (/\s/.test(value)) throw new Error("--repo-url must not contain whitespace");
        opts.repoUrl = value;
        break;
      case "--image-digest":
        if (!IMAGE_DIGEST.test(value)) {
          throw new Error("--image-digest must be an OCI digest such as sha256:<64 lowercase hex>");
        }
        opts.imageDigest = value;
        break;
      case "--image-provenance":
        opts.imageProvenanceUrl = value;
        break;
      case "--write-path":
        // Relative paths would bake in the build machine's directory layout.
        if (!value.startsWith("/")) throw new Error("--write-path must be an absolute path");
        if (value.includes(",")) throw new Error("--write-path must not contain ','");
        writePathsGiven = true;
        opts.writePaths.push(value);
        break;
      case "--include":
        opts.includes.push(value);
        break;
      case "--target":
        opts.target = value;
        break;
      case "--entry":
        opts.entry = value;
        break;
      case "--out-dir":
        opts.outDir = value;
        break;
      default:
        throw new Error(`unknown option ${flag}`);
    }
  }
  if (!writePathsGiven) opts.writePaths = [...DEFAULT_WRITE_PATHS];
  return opts;
}

/**
 * V8 flags the gateway runs with, in `deno task start`/`dev` and baked into the
 * compiled binary. A capped young generation: V8 otherwise grows each
 * semi-space to 32 MiB under a burst of allocation (hundreds of streams
 * opening at once), which showed as ~20 KB more RSS per open stream; 8 MiB
 * keeps minor GCs cheap and rare enough (bench/RESULTS.md).
 */
export const GATEWAY_V8_FLAGS = ["--max-semi-space-size=8"] as const;

/** The `deno compile` arguments; the permissions are fixed into the binary. */
export function compileArgs(opts: {
  entry: string;
  output: string;
  writePaths: readonly string[];
  includes: readonly string[];
  target: string | null;
}): string[] {
  if (opts.writePaths.length === 0) throw new Error("at least one write path is needed");
  return [
    "compile",
    "--frozen-lockfile",
    "--unstable-kv",
    "--no-prompt",
    "--allow-net",
    // Config, TLS and manifest files live wherever the operator puts them.
    "--allow-read",
    `--allow-write=${opts.writePaths.join(",")}`,
    "--allow-env",
    "--allow-sys",
    `--v8-flags=${GATEWAY_V8_FLAGS.join(",")}`,
    ...opts.includes.map((p) => `--include=${p}`),
    ...(opts.target === null ? [] : ["--target", opts.target]),
    "--output",
    opts.output,
    opts.entry,
  ];
}

/** Files a module loads at run time, found in its source text. */
export interface RuntimeLoads {
  /** Literal `new URL("<relative>", import.meta.url)` targets, relative to the module. */
  urls: string[];
  /** `import(...)` calls whose argument is not a string literal (deno cannot follow them). */
  opaqueImports: number;
}

/** Scans module source for run-time file loads that `deno compile` cannot see. */
export function scanRuntimeLoads(source: string): RuntimeLoads {
  const urls = [
    ...source.matchAll(/new URL\(\s*(["'`])(\.{1,2}\/[^"'`$]*)\1\s*,\s*import\.meta\.url\s*\)/g),
  ].map((m) => m[2]);
  let opaqueImports = 0;
  for (const m of source.matchAll(/\bimport\(\s*("[^"\n]*"|'[^'\n]*'|`[^`]*`|[^)\s])/g)) {
    const arg = m[1];
    const literal = /^["']/.test(arg) || (arg.startsWith("`") && !arg.includes("${"));
    if (!literal) opaqueImports++;
  }
  return { urls, opaqueImports };
}
