/**
 * Pure helpers of `build.ts`: its command-line options, the exact
 * `deno compile` arguments (the permissions baked into the binary), and the
 * scan for files the gateway loads at run time, which must be `--include`d.
 */

/**
 * The gateway's permissions, in `deno task start`, the compiled binary and
 * the bundle's command line. `--allow-all` because Deno (2.9) refuses every
 * path under /sys (configfs-tsm is /sys/kernel/config/tsm/report) to any
 * narrower set, including `-A` with any `--deny-*` (denoland/deno#27564).
 */
export const GATEWAY_PERMISSIONS = ["--allow-all"] as const;

/** Runtime flags besides permissions: Deno KV is unstable in 2.9. */
export const GATEWAY_RUNTIME_FLAGS = ["--unstable-kv"] as const;

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
  const opts: BuildOptions = {
    entry: "main.ts",
    outDir: "dist",
    repoUrl: null,
    imageDigest: null,
    imageProvenanceUrl: null,
    artifact: "auto",
    includes: [],
    target: null,
  };
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
      case "--artifact":
        if (value !== "auto" && value !== "binary" && value !== "bundle") {
          throw new Error("--artifact must be auto, binary or bundle");
        }
        opts.artifact = value;
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
