import assert from "node:assert/strict";
import {
  consistencyProof,
  emptyRoot,
  encodeTileIndex,
  inclusionProof,
  leafHash,
  nodeHash,
  parseTilePath,
  type SubtreeReader,
  treeHash,
  verifyConsistency,
  verifyInclusion,
} from "./merkle.ts";

/** RFC 6962 MTH straight from the definition. */
function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return emptyRoot();
  if (leaves.length === 1) return leaves[0];
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

const leaves = Array.from({ length: 40 }, (_, i) => leafHash(new TextEncoder().encode(`e${i}`)));
const read: SubtreeReader = (level, index) =>
  Promise.resolve(mth(leaves.slice(index * 2 ** level, (index + 1) * 2 ** level)));

Deno.test("merkle: roots, inclusion and consistency proofs for every size up to 40", async () => {
  for (let n = 0; n <= leaves.length; n++) {
    const root = await treeHash(read, n);
    assert.deepEqual(root, mth(leaves.slice(0, n)));
    for (let m = 0; m < n; m++) {
      const p = await inclusionProof(read, m, n);
      assert.ok(verifyInclusion(leaves[m], m, n, p, root), `incl ${m}/${n}`);
      assert.ok(!verifyInclusion(leaves[(m + 1) % n], m, n, p, root) || n === 1);
    }
    for (let m = 1; m <= n; m++) {
      const p = await consistencyProof(read, m, n);
      const r1 = mth(leaves.slice(0, m));
      assert.ok(verifyConsistency(m, n, p, r1, root), `cons ${m}->${n}`);
      if (m < n) assert.ok(!verifyConsistency(m, n, p, leaves[0], root) || m === 1);
    }
  }
});

Deno.test("merkle: tile paths in the exact C2SP encoding only", () => {
  assert.equal(encodeTileIndex(1234067), "x001/x234/067");
  assert.equal(encodeTileIndex(5), "005");
  assert.deepEqual(parseTilePath(["0", "x001", "x234", "067"]), {
    level: 0,
    index: 1234067,
    width: 256,
    entries: false,
  });
  assert.equal(parseTilePath(["0", "x001", "x000", "000"])?.index, 1_000_000, "inner zero groups");
  assert.deepEqual(parseTilePath(["entries", "001.p", "7"]), {
    level: 0,
    index: 1,
    width: 7,
    entries: true,
  });
  for (
    const bad of [
      ["0", "1"],
      ["00", "001"],
      ["0", "001.p", "0"],
      ["0", "001.p", "256"],
      [
        "0",
        "001.p",
        "07",
      ],
      ["64", "000"],
      ["0", "001", "002"],
      ["x", "000"],
      // A leading zero group: the same tile under a second name (Go's ParseTilePath refuses it).
      ["0", "x000", "001"],
      ["0", "x000", "x000", "x000", "x000", "x000", "001"],
      ["entries", "x000", "264.p", "213"],
    ]
  ) {
    assert.equal(parseTilePath(bad), null, bad.join("/"));
  }
});
