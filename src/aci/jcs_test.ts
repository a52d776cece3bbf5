import assert from "node:assert/strict";
import { jcs, jcsBytes } from "./jcs.ts";

const fixtures = new URL("../../tests/fixtures/jcs/", import.meta.url);

Deno.test({
  name: "jcs: every RFC 8785 reference vector canonicalizes byte-exactly",
  fn() {
    const names = [...Deno.readDirSync(new URL("input/", fixtures))]
      .map((e) => e.name)
      .filter((n) => n.endsWith(".json"));
    assert.ok(names.length >= 6, "expected the reference vectors");
    for (const name of names) {
      const input = JSON.parse(Deno.readTextFileSync(new URL(`input/${name}`, fixtures)));
      const expected = Deno.readFileSync(new URL(`output/${name}`, fixtures));
      assert.deepEqual(jcsBytes(input), expected, name);
    }
  },
});

Deno.test("jcs: sorts members, drops whitespace, keeps array order", () => {
  assert.equal(
    jcs({ b: [3, 1, { z: 1, a: null }], a: "x" }),
    '{"a":"x","b":[3,1,{"a":null,"z":1}]}',
  );
});

Deno.test("jcs: throws for values without a JSON form instead of returning undefined", () => {
  assert.throws(() => jcs(undefined));
  assert.throws(() => jcs(() => 1));
  assert.throws(() => jcs(Symbol("s")));
  assert.throws(() => jcs({ n: NaN }));
  assert.throws(() => jcs({ n: Infinity }));
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  assert.throws(() => jcs(cyclic));
});
