/**
 * The real-evidence fixtures live in the repository (#20 item 11): every file
 * PROVENANCE.md lists is present with its recorded SHA-256, nothing unlisted
 * sits beside them, and no test in the project can be skipped (`ignore`,
 * `.ignore`, `.only`), so a missing fixture is a failure, never a skip.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";

const ROOT = new URL("../", import.meta.url).pathname;
const FIX = `${ROOT}tests/fixtures`;

/** Not project sources: git's store, build output, and state other tests create and remove. */
const NOT_SOURCE = new Set([".git", ".data", "dist", "node_modules"]);

async function walk(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(`${dir}/${prefix}`)) {
    if (prefix === "" && NOT_SOURCE.has(e.name)) continue;
    const rel = `${prefix}${e.name}`;
    if (e.isDirectory) out.push(...await walk(dir, `${rel}/`));
    else out.push(rel);
  }
  return out;
}

Deno.test("tests/fixtures: every file PROVENANCE.md lists is there with its SHA-256, and only those", async () => {
  const provenance = await Deno.readTextFile(`${FIX}/PROVENANCE.md`);
  const rows = [...provenance.matchAll(/^\| `([^`]+)`\s*\|.*\| `([0-9a-f]{64})`\s*\|$/gm)];
  assert.ok(rows.length >= 20, `only ${rows.length} rows in PROVENANCE.md`);
  for (const [, path, sha] of rows) {
    const bytes = await Deno.readFile(`${FIX}/${path}`);
    assert.equal(createHash("sha256").update(bytes).digest("hex"), sha, path);
  }
  const listed = rows.map((r) => r[1]).sort();
  // nvidia/ has its own PROVENANCE.md and SHA256SUMS (checked by tests/nvidia_vectors_test.ts).
  const present = (await walk(FIX))
    .filter((p) => p !== "PROVENANCE.md" && !p.startsWith("nvidia/") && !p.startsWith("real/"))
    .sort();
  assert.deepEqual(present, listed);
});

Deno.test("no test can be skipped: no ignore/only flags and no fixture lookups outside the repository", async () => {
  const offenders: string[] = [];
  for (const rel of await walk(ROOT)) {
    if (!/_test\.ts$/.test(rel) || rel === "tests/fixtures_test.ts") {
      continue;
    }
    const text = await Deno.readTextFile(`${ROOT}${rel}`);
    if (/\bignore\s*:(?!\s*\[)|Deno\.test\.(ignore|only)\b|\bonly\s*:\s*true/.test(text)) {
      offenders.push(rel);
    }
    if (/shared\/fixtures/.test(text)) offenders.push(`${rel} (reads ../shared/fixtures)`);
  }
  assert.deepEqual(offenders, []);
});
