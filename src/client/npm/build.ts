/**
 * `deno task client-npm`: builds the verifying client as an npm package,
 * `dist/npm/` (one ESM file with its npm dependencies bundled in, so it
 * installs offline, and one declaration file; the same pair for browsers,
 * `browser.js`, under the `browser` condition and `./browser`) and its tarball
 * `dist/aci-verifying-client-<version>.tgz` (`npm pack`). A build script, run
 * by hand or by the Node test; not part of the gateway.
 */
import { bundleBrowserClient } from "../browser/build.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const OUT = `${ROOT}dist/npm`;
const VERSION = "0.1.0";

/** Types the bundled declarations name but whose modules are not public: their shapes here. */
const PRIVATE_TYPES: Record<string, string> = {
  QuoteCheck:
    "type QuoteCheck = (quote: Uint8Array, expectedSlot: Uint8Array, teeType: string) => Check | Promise<Check>;",
  QuoteTrust:
    "interface QuoteTrust { tdxCollateral?: unknown; tdxCollateralJson?: unknown; pcsBaseUrl?: string; tdxRootCaDer?: Uint8Array; snp?: unknown; fetch: typeof fetch; now: () => number }",
  AttestedKey:
    "interface AttestedKey { key_id: string; algo: string; public_key: string; keysetDigest: string }",
};

async function run(cmd: string, args: string[], cwd = ROOT): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed:\n${new TextDecoder().decode(out.stderr)}`);
  }
  return text;
}

/** The declarations with their relative imports replaced by local shapes. */
function fixDeclarations(dts: string): string {
  const names = new Set<string>();
  const kept = dts.split("\n").filter((line) => {
    const m = /^import (?:type )?\{([^}]*)\} from "\.{1,2}\/[^"]*";$/.exec(line);
    if (!m) return true;
    for (const n of m[1].split(",")) {
      const name = n.replace(/\btype\b/, "").trim();
      if (name) names.add(name);
    }
    return false;
  });
  const body = kept.join("\n");
  const shapes = [...names].filter((n) => !new RegExp(`(interface|type|class) ${n}\\b`).test(body))
    .map((n) => PRIVATE_TYPES[n] ?? `type ${n} = unknown;`);
  return `${shapes.join("\n")}\n${body}`;
}

if (import.meta.main) {
  await Deno.remove(OUT, { recursive: true }).catch(() => {});
  await Deno.mkdir(OUT, { recursive: true });
  await run(Deno.execPath(), [
    "bundle",
    "--quiet",
    "--platform=deno",
    "--declaration",
    "-o",
    `${OUT}/index.js`,
    "src/client/node.ts",
  ]);
  const dts = await Deno.readTextFile(`${OUT}/index.d.ts`);
  await Deno.writeTextFile(`${OUT}/index.d.ts`, fixDeclarations(dts));
  // Browsers (bundlers honour the `browser` condition): the build without node: modules.
  const browser = await bundleBrowserClient({ declaration: true });
  await Deno.writeTextFile(`${OUT}/browser.js`, browser.js);
  await Deno.writeTextFile(`${OUT}/browser.d.ts`, fixDeclarations(browser.dts!));
  await Deno.writeTextFile(
    `${OUT}/package.json`,
    JSON.stringify(
      {
        name: "aci-verifying-client",
        version: VERSION,
        description:
          "A fetch for the openai and @anthropic-ai/sdk clients that verifies the attested gateway before a prompt leaves and every receipt after",
        type: "module",
        main: "./index.js",
        types: "./index.d.ts",
        exports: {
          ".": {
            browser: { types: "./browser.d.ts", import: "./browser.js" },
            types: "./index.d.ts",
            import: "./index.js",
          },
          "./browser": { types: "./browser.d.ts", import: "./browser.js" },
        },
        engines: { node: ">=20" },
        license: "Apache-2.0",
        files: ["index.js", "index.d.ts", "browser.js", "browser.d.ts", "README.md"],
      },
      null,
      2,
    ) + "\n",
  );
  await Deno.writeTextFile(
    `${OUT}/README.md`,
    [
      "# aci-verifying-client",
      "",
      "```js",
      'import OpenAI from "openai";',
      'import { verifyingFetch } from "aci-verifying-client";',
      "const client = new OpenAI({ baseURL, apiKey, fetch: verifyingFetch({ baseURL, policy }) });",
      "```",
      "",
      "In a browser (the `browser` condition, or `aci-verifying-client/browser`) the same call works",
      "without TLS pinning, which a page cannot do: E2EE is then required; pass",
      "`dangerouslyAllowBrowser: true` to the SDK.",
      "",
      'See the gateway\'s README, "Verify automatically".',
      "",
    ].join("\n"),
  );
  const packed = (await run("npm", ["pack", "--silent", "--pack-destination", `${ROOT}dist`], OUT))
    .trim().split("\n").at(-1);
  console.log(`${ROOT}dist/${packed}`);
}
