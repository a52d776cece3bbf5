/**
 * `deno task config-docs`: writes `config/schema.json` and
 * `docs/configuration.md` from the zod schema (src/config/reference.ts).
 * `--check` writes nothing and exits 1 when either file is out of date.
 */
import { configReferenceFiles } from "../src/config/mod.ts";

const root = new URL("../", import.meta.url);
const targets = [
  { path: "config/schema.json", key: "schemaJson" },
  { path: "docs/configuration.md", key: "markdown" },
] as const;

const check = Deno.args.includes("--check");
// Building the schema's documents takes a few seconds (zod's JSON Schema export): say so.
console.log(`${check ? "checking" : "generating"} ${targets.map((t) => t.path).join(" and ")}…`);
const files = configReferenceFiles();
let stale = 0;
for (const t of targets) {
  const url = new URL(t.path, root);
  const current = await Deno.readTextFile(url).catch(() => null);
  if (current === files[t.key]) {
    console.log(`${t.path} is up to date`);
    continue;
  }
  if (check) {
    console.error(`${t.path} is out of date: run deno task config-docs`);
    stale++;
  } else {
    await Deno.writeTextFile(url, files[t.key]);
    console.log(`wrote ${t.path}`);
  }
}
Deno.exit(stale === 0 ? 0 : 1);
