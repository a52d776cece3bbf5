import assert from "node:assert/strict";
import { emptyRoot, leafHash, nodeHash, TILE_WIDTH, treeHash } from "../aci/merkle.ts";
import { receiptEntry } from "../aci/log_entry.ts";
import {
  decodeBundle,
  decodeQueued,
  Edge,
  encodeQueued,
  encodeQueuedReceipt,
  findLeafRef,
  packLeafRefs,
  subtreeReader,
  type TileSource,
} from "./tiles.ts";

/** RFC 6962 MTH straight from the definition. */
function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return emptyRoot();
  if (leaves.length === 1) return leaves[0];
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

const entryOf = (i: number) => new TextEncoder().encode(`{"kind":"test","n":${i}}`);

/** A store the way the sequencer writes it: whole tiles and bundles, last write wins. */
function store() {
  const tiles = new Map<string, Uint8Array>();
  const bundles = new Map<number, Uint8Array>();
  const tile: TileSource = (level, index) =>
    Promise.resolve(tiles.get(`${level}/${index}`) ?? null);
  const bundle: TileSource = (_l, index) => Promise.resolve(bundles.get(index) ?? null);
  const apply = (w: ReturnType<Edge["append"]>) => {
    for (const t of w.tiles) tiles.set(`${t.level}/${t.index}`, t.bytes);
    for (const b of w.bundles) bundles.set(b.index, b.bytes);
  };
  return { tiles, tile, bundle, apply };
}

Deno.test("edge: the compact-range root equals RFC 6962's, sizes 0 to 140 and across a tile", () => {
  const edge = Edge.empty();
  const leaves: Uint8Array[] = [];
  assert.deepEqual(edge.root(), emptyRoot());
  for (let i = 0; i < 600; i++) {
    edge.append([entryOf(i)]);
    leaves.push(leafHash(entryOf(i)));
    if (i < 140 || i % 31 === 0 || i === 255 || i === 256 || i === 511) {
      assert.deepEqual(edge.root(), mth(leaves), `size ${i + 1}`);
    }
  }
});

Deno.test("edge: tiles, bundles and reloads agree with a from-scratch tree", async () => {
  const s = store();
  let edge = Edge.empty();
  const leaves: Uint8Array[] = [];
  // Uneven batches across tile boundaries (heights 8, 16, … share one code path in append).
  const total = 3 * TILE_WIDTH + 44;
  let n = 0;
  let step = 0;
  while (n < total) {
    const count = Math.min(total - n, [1, 255, 2, 300, 100, 7, 1][step++ % 7]);
    const entries = Array.from({ length: count }, (_, i) => entryOf(n + i));
    const w = edge.append(entries);
    s.apply(w);
    for (let i = 0; i < count; i++) leaves.push(leafHash(entries[i]));
    assert.deepEqual(w.leaves, leaves.slice(n, n + count));
    n += count;
    // The root from the stored tiles (what proofs read) equals the edge's own.
    assert.deepEqual(await treeHash(subtreeReader(s.tile), n), edge.root(), `size ${n}`);
    // Another replica loading the edge from the store continues identically.
    if (step % 5 === 0) edge = await Edge.load(n, s.tile, s.bundle);
  }
  // Level-0 tiles are the leaf hashes (full and partial); level-1 hashes are the MTH of 256 leaves.
  assert.equal(s.tiles.get("0/2")!.length, TILE_WIDTH * 32);
  const t0 = s.tiles.get("0/3")!;
  assert.equal(t0.length, 44 * 32);
  assert.deepEqual(t0.subarray(32, 64), leaves[3 * TILE_WIDTH + 1]);
  const t1 = s.tiles.get("1/0")!;
  assert.equal(t1.length, 3 * 32);
  assert.deepEqual(t1.subarray(2 * 32, 3 * 32), mth(leaves.slice(2 * 256, 3 * 256)));
  const b = decodeBundle((await s.bundle(0, 3))!);
  assert.equal(b.length, 44);
  assert.deepEqual(b[10], entryOf(3 * 256 + 10));
});

Deno.test("leaf refs: an entry's index is found by its hash in packed rows, and only then", () => {
  const refs = [7, 8, 2 ** 40 + 3].map((index) => ({ index, hash: leafHash(entryOf(index)) }));
  const packed = packLeafRefs(refs);
  for (const r of refs) assert.equal(findLeafRef(packed, r.hash), r.index);
  assert.equal(findLeafRef(packed, leafHash(entryOf(9))), null);
  assert.equal(findLeafRef(new Uint8Array(0), refs[0].hash), null);
});

Deno.test("queued entries: the second rides along when given, JCS entries pass as they are", () => {
  const e = entryOf(1);
  assert.deepEqual(decodeQueued(encodeQueued(e, 1_780_000_000)), {
    entry: e,
    second: 1_780_000_000,
  });
  assert.deepEqual(decodeQueued(encodeQueued(e)), { entry: e, second: null });
  // Out of u32 range: queued without a second (found by its hash-keyed row instead).
  assert.deepEqual(decodeQueued(encodeQueued(e, 2 ** 32)), { entry: e, second: null });
});

Deno.test("queued receipts: 37 bytes each, the entry spelled out again exactly, past 2^31 too", () => {
  const jcs = '{"api_version":"aci/1","receipt_id":"r1","note":"\u00e9"}';
  for (const second of [0, 1_780_000_000, 2 ** 31 + 5, 2 ** 32 - 1]) {
    const frame = encodeQueuedReceipt(jcs, second);
    assert.equal(frame.length, 37);
    assert.deepEqual(decodeQueued(frame), { entry: receiptEntry(jcs), second });
  }
  // A second out of range: the entry queued whole, found by its hash-keyed row instead.
  assert.deepEqual(decodeQueued(encodeQueuedReceipt(jcs, -1)), {
    entry: receiptEntry(jcs),
    second: null,
  });
  // A truncated compact frame is an error, not a wrong entry.
  assert.throws(() => decodeQueued(encodeQueuedReceipt(jcs, 7).subarray(0, 20)));
});
