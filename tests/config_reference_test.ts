/**
 * The configuration reference (#20 item 9): config/schema.json and
 * docs/configuration.md are what the generator makes from the zod schema
 * today (so they cannot drift), every field is documented, and
 * config/example.json refers to the schema and starts on this machine (no
 * TEE) with exactly the one change the reference documents.
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { configFields, configJsonSchema, configReferenceFiles } from "../src/config/reference.ts";
import { FIELD_DOCS } from "../src/config/field_docs.ts";
import { configSchema } from "../src/config/schema.ts";
import { ROOT, runToEnd, spawnListening, taskArgs } from "./support/task_line.ts";

const START = await taskArgs("start");

Deno.test("config/schema.json and docs/configuration.md are exactly what the zod schema generates", async () => {
  const files = configReferenceFiles();
  assert.equal(await Deno.readTextFile(`${ROOT}config/schema.json`), files.schemaJson);
  assert.equal(await Deno.readTextFile(`${ROOT}docs/configuration.md`), files.markdown);
  // The task's own command line agrees (and writes nothing in --check mode).
  const check = await runToEnd(Deno.execPath(), [...await taskArgs("config-docs"), "--check"]);
  assert.equal(check.code, 0, check.stderr.join("\n"));
  // Never silent (#31): it says what it checks and how each file stands.
  assert.deepEqual(check.stdout, [
    "checking config/schema.json and docs/configuration.md…",
    "config/schema.json is up to date",
    "docs/configuration.md is up to date",
  ]);
});

Deno.test("every field is documented with its type and default; drift either way is an error", () => {
  const rows = configFields();
  const md = configReferenceFiles().markdown;
  for (const r of rows) {
    assert.ok(r.description.length > 10, r.path);
    assert.ok(md.includes(`| \`${r.path}\` |`), r.path);
  }
  const byPath = new Map(rows.map((r) => [r.path, r]));
  assert.equal(byPath.get("identity.allow_dev_quotes")?.defaultJson, "false");
  assert.equal(byPath.get("limits.max_body_bytes")?.defaultJson, "4194304");
  assert.equal(byPath.get("providers[].zdr")?.required, true);
  assert.equal(byPath.get("identity.quote_provider")?.type, '"configfs" | "dev" | "auto"');
  // A field added to the zod schema without a description stops the generator…
  const grown = configSchema.safeExtend({ brand_new: z.boolean().default(false) });
  assert.throws(() => configJsonSchema(grown), /config field brand_new has no entry/);
  // …and so does a description of a field that is gone.
  assert.throws(
    () => configJsonSchema(configSchema, { ...FIELD_DOCS, "limits.gone": "x" }),
    /documents fields the schema lacks: limits\.gone/,
  );
});

/** The variables example.json's providers name (an unset one stops start-up). */
const CREDENTIALS = { OPENAI_API_KEY: "sk-test", TEE_NODE_API_KEY: "tee-test" };

Deno.test("config/example.json: refers to the schema; on this machine it refuses to start, and starts after the one documented change", async () => {
  const text = await Deno.readTextFile(`${ROOT}config/example.json`);
  const example = JSON.parse(text);
  assert.equal(example.$schema, "./schema.json");
  assert.equal(example.identity.allow_dev_quotes, false);
  assert.match(
    await Deno.readTextFile(`${ROOT}docs/configuration.md`),
    /starts after exactly one change: set `identity\.allow_dev_quotes` to `true`/,
  );
  const dir = await Deno.makeTempDir();
  try {
    // As shipped: no configfs-tsm here, and no consent to dev quotes: one line, exit 2.
    const asShipped = await runToEnd(Deno.execPath(), [
      ...START,
      "--config",
      "config/example.json",
      "--port",
      "0",
    ], { env: CREDENTIALS });
    assert.equal(asShipped.code, 2, asShipped.stderr.join("\n"));
    assert.match(asShipped.stderr.at(-1)!, /allow_dev_quotes: true/);

    const changed = structuredClone(example);
    changed.identity.allow_dev_quotes = true;
    const path = `${dir}/example.json`;
    await Deno.writeTextFile(path, JSON.stringify(changed, null, 2));
    const gw = await spawnListening(
      Deno.execPath(),
      [...START, "--config", path, "--port", "0"],
      { env: CREDENTIALS },
    );
    try {
      const models = await fetch(`${gw.url}/v1/models`);
      assert.equal(models.status, 200);
      const ids = (await models.json()).data.map((m: { id: string }) => m.id);
      assert.ok(ids.includes("openai/gpt-4o-mini"), ids.join(","));
      const report = await (await fetch(`${gw.url}/v1/aci/attestation`)).json();
      assert.equal(report.attestation.tee_type, "dev-insecure-no-tee");
    } finally {
      assert.equal((await gw.stop()).code, 0);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
