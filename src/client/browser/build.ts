/**
 * `deno task client-browser`: the verifying client as one browser ESM file,
 * `dist/browser/aci-verifying-client.js` (`deno bundle --platform browser`
 * of `src/client/browser.ts`, npm dependencies included). The shared code's
 * node:crypto / node:buffer primitives, kept on the gateway's hot path, are
 * swapped for pure-JS builds with the same exports through an import map made
 * from deno.json's own imports. A build script, run by hand, by the npm
 * build (the package's `browser` condition) and by the browser test.
 */
const ROOT = new URL("../../../", import.meta.url);
const BROWSER_OUT = new URL("dist/browser/aci-verifying-client.js", ROOT);

/** Module → its browser build (same exports; `swaps_test.ts` checks they agree). */
export const BROWSER_SWAPS: Record<string, string> = {
  "src/aci/digest.ts": "src/verify/browser/digest.ts",
  "src/aci/hex.ts": "src/verify/browser/hex.ts",
  "src/aci/ed25519.ts": "src/verify/browser/ed25519.ts",
  "src/e2ee/aead.ts": "src/client/browser/aead.ts",
  "src/e2ee/x25519.ts": "src/client/browser/x25519.ts",
};

/** The bundled script (and its declarations); throws if anything node- or Deno-only is left in it. */
export async function bundleBrowserClient(
  o: { declaration?: boolean } = {},
): Promise<{ js: string; dts: string | null }> {
  const deno = JSON.parse(await Deno.readTextFile(new URL("deno.json", ROOT)));
  const map = {
    imports: {
      ...deno.imports,
      ...Object.fromEntries(
        Object.entries(BROWSER_SWAPS).map(([from, to]) => [
          new URL(from, ROOT).href,
          new URL(to, ROOT).href,
        ]),
      ),
    },
  };
  const dir = await Deno.makeTempDir({ prefix: "client-browser-" });
  try {
    const mapPath = `${dir}/import_map.json`;
    await Deno.writeTextFile(mapPath, JSON.stringify(map));
    const out = `${dir}/client.js`;
    const res = await new Deno.Command(Deno.execPath(), {
      args: [
        "bundle",
        "--quiet",
        "--platform",
        "browser",
        "--format",
        "esm",
        "--minify",
        ...(o.declaration ? ["--declaration"] : []),
        "--import-map",
        mapPath,
        "--output",
        out,
        new URL("src/client/browser.ts", ROOT).pathname,
      ],
      cwd: ROOT.pathname,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    if (!res.success) {
      throw new Error(`deno bundle failed:\n${new TextDecoder().decode(res.stderr)}`);
    }
    const js = await Deno.readTextFile(out);
    const leftover = /\bfrom\s*"node:[a-z_/]+"|\bimport\(\s*"node:|\bDeno\.[a-z]/.exec(js);
    if (leftover) throw new Error(`the browser bundle still uses ${leftover[0]}`);
    return { js, dts: o.declaration ? await Deno.readTextFile(`${dir}/client.d.ts`) : null };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  const { js } = await bundleBrowserClient();
  await Deno.mkdir(new URL(".", BROWSER_OUT), { recursive: true });
  await Deno.writeTextFile(BROWSER_OUT, js);
  console.log(`${BROWSER_OUT.pathname} (${js.length} bytes)`);
}
