import assert from "node:assert/strict";
import { coalesceSums, type KvWrite } from "./kv_writes.ts";

Deno.test("coalesceSums: key parts match by type and exact value, byte strings by content", () => {
  const sum = (key: Deno.KvKey, value: bigint): KvWrite => ({ op: "sum", key, value });
  const out = coalesceSums([
    sum(["k", new Uint8Array([1, 2])], 1n),
    sum(["k", new Uint8Array([1, 2])], 2n), // same bytes: merged
    sum(["k", "u1,2"], 4n), // a string spelling the bytes' tag: its own key
    sum(["k", 1], 8n),
    sum(["k", 1n], 16n), // bigint 1 is not number 1
    sum(["k", "1"], 32n),
    sum(["k", 0], 64n),
    sum(["k", -0], 128n), // KV encodes -0 and 0 apart
    sum(["k", 1], 256n), // merged into the first number 1
    sum(["k", true], 512n),
  ]);
  assert.deepEqual(out.map((o) => [o.key[1], (o as { value: bigint }).value]), [
    [new Uint8Array([1, 2]), 3n],
    ["u1,2", 4n],
    [1, 264n],
    [1n, 16n],
    ["1", 32n],
    [0, 64n],
    [-0, 128n],
    [true, 512n],
  ]);
  assert.ok(Object.is(out[6].key[1], -0));
});

Deno.test("coalesceSums: a sum on a key a set or delete touches stays as it is, in order", () => {
  const ops: KvWrite[] = [
    { op: "sum", key: ["a", new Uint8Array([9])], value: 1n },
    { op: "delete", key: ["a", new Uint8Array([9])] },
    { op: "sum", key: ["a", new Uint8Array([9])], value: 2n },
    { op: "sum", key: ["b"], value: 1n },
    { op: "sum", key: ["b"], value: 1n },
  ];
  assert.deepEqual(coalesceSums(ops), [ops[0], ops[1], ops[2], {
    op: "sum",
    key: ["b"],
    value: 2n,
  }]);
  const noSums: KvWrite[] = [{ op: "set", key: ["x"], value: 1 }];
  assert.deepEqual(coalesceSums(noSums), noSums);
});

Deno.test("mergeFrames: one commit's frames under one prefix share a row at the first frame's key", async () => {
  const { mergeFrames, framed } = await import("./kv_writes.ts");
  const f = (id: string, b: number) => ({
    op: "frame" as const,
    key: ["q", "p", id],
    value: new Uint8Array([b]),
  });
  const other = { op: "set" as const, key: ["x"], value: 1 };
  const out = mergeFrames([f("a", 1), other, f("b", 2), f("c", 3)]);
  assert.deepEqual(out, [other, {
    op: "set",
    key: ["q", "p", "a"],
    value: framed([new Uint8Array([1]), new Uint8Array([2]), new Uint8Array([3])]),
  }]);
  // Rows stay inside SQLite's in-page payload: a large commit's frames spread over several rows.
  const many = Array.from({ length: 400 }, (_, i) => ({
    op: "frame" as const,
    key: ["q", "p", `k${i}`],
    value: new Uint8Array(200),
  }));
  const rows = mergeFrames(many);
  assert.ok(
    rows.length > 1 &&
      rows.every((r) => r.op === "set" && (r.value as Uint8Array).length <= 900),
  );
  assert.equal(
    rows.reduce((a, r) => a + ((r as { value: Uint8Array }).value.length), 0),
    400 * 202,
  );
});
