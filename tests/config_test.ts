import assert from "node:assert/strict";
import { ConfigError, parseConfig } from "../src/config/schema.ts";

Deno.test("the documented example configuration is valid", async () => {
  const text = await Deno.readTextFile(new URL("../config/example.json", import.meta.url));
  const cfg = parseConfig(text);
  assert.equal(cfg.providers.length, 2);
  assert.equal(cfg.tiers.free.rpm, 60);
});

Deno.test("a bad configuration names the bad field's path", () => {
  const base = {
    listen: { base: { port: 1 } },
    store: { path: "x.kv" },
    providers: [{ name: "p", base_url: "http://127.0.0.1:1", zdr: false }],
  };
  const cases: [unknown, RegExp][] = [
    [
      { ...base, providers: [{ name: "p", base_url: "nope", zdr: false }] },
      /providers\.0\.base_url/,
    ],
    [{ ...base, providers: [{ name: "p", base_url: "http://x", zdr: "no" }] }, /providers\.0\.zdr/],
    [{ ...base, listen: { base: { port: 70000 } } }, /listen\.base\.port/],
    [{ ...base, extra: 1 }, /\(root\)|extra/],
    [{
      ...base,
      models: [{
        id: "bad-id",
        name: "x",
        created: 1,
        context_length: 1,
        max_output_length: 1,
        input_modalities: ["text"],
        output_modalities: ["text"],
        pricing: { prompt: 0, completion: 0 },
        supported_parameters: ["max_tokens"],
        routes: [{ provider: "p", model: "m" }],
      }],
    }, /models\.0\.id/],
    [{
      ...base,
      models: [{
        id: "a/b",
        name: "x",
        created: 1,
        context_length: 1,
        max_output_length: 1,
        input_modalities: ["text"],
        output_modalities: ["text"],
        pricing: { prompt: 0, completion: 0 },
        supported_parameters: ["max_tokens"],
        routes: [{ provider: "ghost", model: "m" }],
      }],
    }, /models\.0\.routes\.0\.provider: unknown provider/],
  ];
  for (const [doc, re] of cases) {
    assert.throws(
      () => parseConfig(JSON.stringify(doc)),
      (e: unknown) => e instanceof ConfigError && re.test(e.message),
    );
  }
  assert.throws(() => parseConfig("{"), /not valid JSON/);
});
