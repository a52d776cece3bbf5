/**
 * Pure helpers of `build.ts`: its command-line options, the exact
 * `deno compile` arguments (the permissions baked into the binary), and the
 * scan for files the gateway loads at run time, which must be `--include`d.
 */
import { parseOptions } from "../src/cli/mod.ts";

/**
 * The gateway's permissions, in `deno task start`, the compiled binary and
 * the bundle's command line. `--allow-all` because Deno (2.9) refuses every
 * path under /sys (configfs-tsm is /sys/kernel/config/tsm/report) to any
 * narrower set, including `-A` with any `--deny-*` (denoland/deno#27564).
 */
export const GATEWAY_PERMISSIONS = ["--allow-all"] as const;

/** Runtime flags besides permissions: Deno KV and SO_REUSEPORT listeners (workers) are unstable in 2.9. */
export const GATEWAY_RUNTIME_FLAGS = ["--unstable-kv", "--unstable-net"] as const;

export interface BuildOptions {
  entry: string;
  outDir: string;
  repoUrl: string | null;
  imageDigest: string | null;
  imageProvenanceUrl: string | null;
  /** `auto`: the binary, or the bundle pair when deno compile cannot get its runtime. */
  artifact: "auto" | "binary" | "bundle";
  /** Extra `--include` values, beyond the scanned ones. */
  includes: string[];
  target: string | null;
}

export const BUILD_USAGE =
  "usage: deno task compile [--repo-url URL] [--image-digest sha256:HEX] " +
  "[--image-provenance URL] [--artifact auto|binary|bundle] [--include PATH]... [--target TRIPLE] " +
  "[--entry main.ts] [--out-dir dist]";

const IMAGE_DIGEST = /^(sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96}|sha512:[0-9a-f]{128})$/;

/** Parses `build.ts` arguments (`--flag value` or `--flag=value`); throws on anything unknown. */
export function parseBuildArgs(args: readonly string[]): BuildOptions {
  const { values: v, lists } = parseOptions(args, {
    strings: [
      "repo-url",
      "image-digest",
      "image-provenance",
      "artifact",
      "target",
      "entry",
      "out-dir",
    ],
    multiple: ["include"],
  });
  if (v["repo-url"] !== undefined && /\s/.test(v["repo-url"])) {
    throw new Error("--repo-url must not contain whitespace");
  }
  if (v["image-digest"] !== undefined && !IMAGE_DIGEST.test(v["image-digest"])) {
    throw new Error("--image-digest must be an OCI digest such as sha256:<64 lowercase hex>");
  }
  const artifact = v.artifact ?? "auto";
  if (artifact !== "auto" && artifact !== "binary" && artifact !== "bundle") {
    throw new Error("--artifact must be auto, binary or bundle");
  }
  return {
    entry: v.entry ?? "main.ts",
    outDir: v["out-dir"] ?? "dist",
    repoUrl: v["repo-url"] ?? null,
    imageDigest: v["image-digest"] ?? null,
    imageProvenanceUrl: v["image-provenance"] ?? null,
    artifact,
    includes: lists.include,
    target: v.target ?? null,
  };
}

/**
 * V8 flags the gateway runs with, in `deno task start`/`dev` and baked into the
 * compiled binary. A capped young generation: V8 otherwise grows each
 * semi-space to 32 MiB under a burst of allocation (hundreds of streams
 * opening at once), which showed as ~20 KB more RSS per open stream; 8 MiB
 * keeps minor GCs cheap and rare enough (measured in bench/RESULTS.md's git history).
 * An old generation that at most doubles before a major GC (V8 lets it grow up
 * to 4×): a flood of large bodies otherwise piles up garbage to a 430 MB peak
 * (issue #15's bound is 400 MB); with it the peak is ~290 MB (docs/decisions/019-old-generation-growth.md).
 */
export const GATEWAY_V8_FLAGS = ["--max-semi-space-size=8", "--heap-growing-percent=100"] as const;

/** The `deno compile` arguments; the permissions are fixed into the binary. */
export function compileArgs(opts: {
  entry: string;
  output: string;
  includes: readonly string[];
  target: string | null;
}): string[] {
  return [
    "compile",
    "--frozen-lockfile",
    ...GATEWAY_RUNTIME_FLAGS,
    "--no-prompt",
    ...GATEWAY_PERMISSIONS,
    `--v8-flags=${GATEWAY_V8_FLAGS.join(",")}`,
    ...opts.includes.map((p) => `--include=${p}`),
    ...(opts.target === null ? [] : ["--target", opts.target]),
    "--output",
    opts.output,
    opts.entry,
  ];
}

/** The `deno bundle` arguments: one JavaScript file for the Deno runtime. */
export function bundleArgs(opts: { entry: string; output: string }): string[] {
  return ["bundle", "--frozen-lockfile", "--platform", "deno", "--output", opts.output, opts.entry];
}

/**
 * How the bundle pair runs, from the directory holding both files: the Deno
 * executable, the gateway's permissions and flags, and the script.
 * `--no-config`/`--no-lock`: the bundle is self-contained, and a deno.json in
 * a parent directory must not change how the measured script runs.
 */
export function bundleRunArgs(opts: { runtime: string; script: string }): string[] {
  return [
    `./${opts.runtime}`,
    "run",
    "--no-config",
    "--no-lock",
    "--no-prompt",
    ...GATEWAY_RUNTIME_FLAGS,
    ...GATEWAY_PERMISSIONS,
    `--v8-flags=${GATEWAY_V8_FLAGS.join(",")}`,
    `./${opts.script}`,
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
