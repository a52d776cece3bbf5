/**
 * `deno task compile`: compiles `main.ts` into the single measured binary
 * `dist/gateway` with its permissions baked in, and always writes
 * `dist/manifest.json` (binary hashes when built, plus the source commit,
 * source digest, Deno version and lockfile hash) so a reproducer can check
 * the input even when no binary could be built here.
 *
 * Offline machines cannot download deno's runtime (denort). Then (or with
 * `--artifact bundle`) the measured artifact is the pair: `dist/gateway.js`
 * from `deno bundle --platform deno` and `dist/deno`, a copy of the exact Deno
 * executable running this build; the manifest records both digests and the
 * command line that runs them. A DENORT_BIN that does not exist is an operator
 * error: one line, a source-only manifest, exit 1. A binary is never faked.
 */

import {
  BUILD_USAGE,
  type BuildOptions,
  bundleArgs,
  bundleRunArgs,
  compileArgs,
  parseBuildArgs,
  scanRuntimeLoads,
} from "./build_args.ts";
import {
  buildManifest,
  denortFailureLine,
  detectDenortFailure,
  sha256Hex,
  type SourceFile,
} from "./manifest.ts";

export { sourceProvenanceFromManifest } from "./manifest.ts";

/** Directories never part of the source, for the no-git fallback listing. */
const WALK_EXCLUDES = new Set([".git", "dist", ".data", "node_modules"]);

interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(cmd: string, args: string[], cwd: string): Promise<CommandResult | null> {
  try {
    const out = await new Deno.Command(cmd, {
      args,
      cwd,
      env: { NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}

interface GitState {
  commit: string | null;
  dirty: boolean | null;
  files: string[] | null;
}

async function gitState(root: string): Promise<GitState> {
  const head = await run("git", ["rev-parse", "HEAD"], root);
  if (head === null || head.code !== 0) return { commit: null, dirty: null, files: null };
  const status = await run("git", ["status", "--porcelain", "--untracked-files=all"], root);
  const list = await run("git", ["ls-files", "-co", "--exclude-standard", "-z"], root);
  return {
    commit: head.stdout.trim(),
    dirty: status === null || status.code !== 0 ? null : status.stdout.trim() !== "",
    files: list === null || list.code !== 0
      ? null
      : list.stdout.split("\0").filter((p) => p !== ""),
  };
}

async function walk(root: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(`${root}/${prefix}`)) {
    if (prefix === "" && WALK_EXCLUDES.has(entry.name)) continue;
    const rel = `${prefix}${entry.name}`;
    if (entry.isDirectory) out.push(...await walk(root, `${rel}/`));
    else if (entry.isFile) out.push(rel);
  }
  return out;
}

/** Hashes the listed files that exist as regular files (deleted tracked files are skipped). */
async function hashFiles(root: string, paths: string[]): Promise<SourceFile[]> {
  const files: SourceFile[] = [];
  for (const path of paths) {
    let info: Deno.FileInfo;
    try {
      info = await Deno.stat(`${root}/${path}`);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) continue;
      throw e;
    }
    if (!info.isFile) continue;
    files.push({ path, sha256: sha256Hex(await Deno.readFile(`${root}/${path}`)) });
  }
  return files;
}

async function readOptional(path: string): Promise<Uint8Array | null> {
  try {
    return await Deno.readFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/** Resolves `.`/`..` in a root-relative path; null when it leaves the root. */
function normalize(path: string): string | null {
  const parts: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (parts.length === 0) return null;
      parts.pop();
    } else {
      parts.push(part);
    }
  }
  return parts.join("/");
}

/** `--include` values for files the runtime sources load by URL, with warnings for the rest. */
async function runtimeIncludes(root: string, files: SourceFile[]): Promise<string[]> {
  const includes = new Set<string>();
  for (const { path } of files) {
    const isRuntimeTs = /\.(ts|tsx|js|mjs)$/.test(path) && !/_test\.|\/tests?\//.test(path) &&
      (path === "main.ts" || path.startsWith("src/"));
    if (!isRuntimeTs) continue;
    const loads = scanRuntimeLoads(await Deno.readTextFile(`${root}/${path}`));
    const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/") + 1) : "";
    for (const url of loads.urls) {
      const target = normalize(`${dir}${url}`);
      // Only project files can be embedded; anything else is the operator's to provide.
      if (target !== null && target !== "" && await exists(`${root}/${target}`)) {
        includes.add(target);
      }
    }
    if (loads.opaqueImports > 0) {
      console.error(
        `warning: ${path} has ${loads.opaqueImports} import() with a computed specifier; ` +
          "pass --include for what it loads",
      );
    }
  }
  return [...includes].sort();
}

/** A progress line on stderr: the build takes long enough that silence looks like a hang. */
function progress(line: string): void {
  console.error(`compile: ${line}`);
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function main(args: string[]): Promise<number> {
  let opts: BuildOptions;
  try {
    opts = parseBuildArgs(args);
  } catch (e) {
    console.error(`${e instanceof Error ? e.message : String(e)}\n${BUILD_USAGE}`);
    return 2;
  }
  const root = decodeURIComponent(new URL("..", import.meta.url).pathname).replace(/\/$/, "");
  const outDir = opts.outDir.startsWith("/") ? opts.outDir : `${root}/${opts.outDir}`;
  const output = `${outDir}/gateway`;
  // Paths as recorded in the manifest: relative to the project root when inside it.
  const shown = (p: string) => p.startsWith(`${root}/`) ? p.slice(root.length + 1) : p;
  const manifestPath = `${outDir}/manifest.json`;
  await Deno.mkdir(outDir, { recursive: true });
  // A stale binary next to a fresh manifest would misrepresent this build.
  for (const stale of [output, manifestPath]) await Deno.remove(stale).catch(() => undefined);

  progress(`listing and hashing the sources of ${opts.entry}`);
  const git = await gitState(root);
  const listing = git.files === null ? "walk" : "git";
  const files = await hashFiles(root, git.files ?? await walk(root));
  progress(`hashed ${files.length} files (${listing} listing)`);
  const includes = [...await runtimeIncludes(root, files), ...opts.includes];
  const argv = compileArgs({ entry: opts.entry, output, includes, target: opts.target });
  const scriptPath = `${outDir}/gateway.js`;
  const runtimePath = `${outDir}/deno`;
  for (const stale of [scriptPath, runtimePath]) await Deno.remove(stale).catch(() => undefined);

  const denortPath = Deno.env.get("DENORT_BIN") ?? null;
  const denortBin = denortPath === null ? null : { bytes: await readOptional(denortPath) };
  const denoVersion = Deno.version.deno;
  let artifact: { path: string; bytes: Uint8Array } | null = null;
  let buildFailure: string | null = null;

  let bundle: Bundle | null = null;
  let wantBundle = opts.artifact === "bundle";
  if (!(await exists(`${root}/${opts.entry}`))) {
    buildFailure = `entry ${opts.entry} not found`;
    wantBundle = false;
    console.error(
      `deno compile: ${buildFailure} (${shown(manifestPath)} was written as source-only).`,
    );
  } else if (wantBundle) {
    buildFailure = "not compiled: --artifact bundle";
  } else {
    progress(`deno compile ${opts.entry} → ${shown(output)} (takes 10–20 s)`);
    const result = await new Deno.Command(Deno.execPath(), {
      args: argv,
      cwd: root,
      env: { NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(result.stderr);
    if (result.code === 0) {
      artifact = { path: shown(output), bytes: await Deno.readFile(output) };
    } else {
      const denort = detectDenortFailure(stderr);
      if (denort !== null && denort.reason === "download_failed" && opts.artifact === "auto") {
        buildFailure = "denort_unavailable: download failed (offline); built the bundle pair";
        wantBundle = true;
      } else if (denort !== null) {
        buildFailure = denort.reason === "denort_bin_missing"
          ? "denort_unavailable: DENORT_BIN does not exist"
          : "denort_unavailable: download failed (offline)";
        console.error(denortFailureLine(denort, denoVersion, shown(manifestPath)));
      } else {
        buildFailure = `deno compile failed with exit code ${result.code}`;
        console.error(stderr.trimEnd());
        console.error(`${buildFailure} (${shown(manifestPath)} was written as source-only).`);
      }
    }
  }
  if (wantBundle) {
    progress(`deno bundle ${opts.entry} → ${shown(scriptPath)}, with a copy of this Deno`);
    bundle = await buildBundle(root, opts.entry, scriptPath, runtimePath, shown);
    if (bundle === null) {
      buildFailure = `${buildFailure}; deno bundle failed`;
      console.error(`deno bundle failed (${shown(manifestPath)} was written as source-only).`);
    }
  }
  const run = artifact !== null
    ? ["./gateway"]
    : bundle !== null
    ? bundleRunArgs({ runtime: "deno", script: "gateway.js" })
    : null;

  const manifest = buildManifest({
    artifact,
    buildFailure,
    commit: git.commit,
    dirty: git.dirty,
    listing,
    files,
    denoVersion,
    denoLock: await readOptional(`${root}/deno.lock`),
    entry: opts.entry,
    bundle,
    run,
    compileArgs: argv.map((a) => a === output ? shown(output) : a),
    denortBin,
    repoUrl: opts.repoUrl,
    imageDigest: opts.imageDigest,
    imageProvenanceUrl: opts.imageProvenanceUrl,
  });
  await Deno.writeTextFile(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  if (manifest.artifact !== null) {
    console.log(
      `built dist/gateway sha256=${manifest.artifact.sha256} sha384=${manifest.artifact.sha384}; ` +
        `source ${manifest.source.digest}; wrote ${shown(manifestPath)}`,
    );
    return 0;
  }
  if (manifest.bundle !== null) {
    console.log(
      `built ${manifest.bundle.script.path} sha256=${manifest.bundle.script.sha256} and ` +
        `${manifest.bundle.runtime.path} (Deno ${denoVersion}) ` +
        `sha256=${manifest.bundle.runtime.sha256}` +
        (opts.artifact === "auto" ? " (deno compile cannot get its runtime here)" : "") +
        `; run in ${shown(outDir)}: ${manifest.run!.join(" ")} serve --config FILE; ` +
        `wrote ${shown(manifestPath)}`,
    );
    return 0;
  }
  return 1;
}

interface Bundle {
  script: { path: string; bytes: Uint8Array };
  runtime: { path: string; bytes: Uint8Array };
}

/** `deno bundle` into `scriptPath` and a copy of this very Deno executable at `runtimePath`. */
async function buildBundle(
  root: string,
  entry: string,
  scriptPath: string,
  runtimePath: string,
  shown: (p: string) => string,
): Promise<Bundle | null> {
  const result = await new Deno.Command(Deno.execPath(), {
    args: bundleArgs({ entry, output: scriptPath }),
    cwd: root,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (result.code !== 0) {
    console.error(new TextDecoder().decode(result.stderr).trimEnd());
    return null;
  }
  await Deno.copyFile(Deno.execPath(), runtimePath);
  await Deno.chmod(runtimePath, 0o755);
  return {
    script: { path: shown(scriptPath), bytes: await Deno.readFile(scriptPath) },
    runtime: { path: shown(runtimePath), bytes: await Deno.readFile(runtimePath) },
  };
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
