import assert from "node:assert/strict";
import { emptyRoot, leafHash, nodeHash, TILE_WIDTH, treeHash } from "../aci/merkle.ts";
import { receiptEntry } from "../aci/log_entry.ts";
import { framed } from "../store/mod.ts";
import { bundleKey, MAX_CHUNKS, readBundle, tileKey } from "./chunks.ts";
import {
  decodeQueued,
  Edge,
  type EdgeWrites,
  encodeQueued,
  encodeQueuedReceipt,
  findLeafRef,
  kvRows,
  packLeafRefs,
  subtreeReader,
  tileSource,
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

/** A store the way the sequencer writes it: Deno KV, each append's rows in one commit. */
async function store() {
  const kv = await Deno.openKv(":memory:");
  const rows = kvRows(kv);
  const tile = tileSource(rows);
  const apply = async (w: EdgeWrites) => {
    const atomic = kv.atomic();
    for (const x of w.sets) atomic.set(x.key, x.value);
    for (const k of w.deletes) atomic.delete(k);
    assert.ok((await atomic.commit()).ok);
  };
  const count = async (prefix: Deno.KvKey) => {
    let n = 0;
    for await (const _ of kv.list({ prefix })) n++;
    return n;
  };
  return { kv, rows, tile, apply, count };
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

Deno.test("edge: chunked tiles, bundles and reloads agree with a from-scratch tree", async () => {
  const s = await store();
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
    await s.apply(w);
    for (let i = 0; i < count; i++) leaves.push(leafHash(entries[i]));
    assert.deepEqual(w.leaves, leaves.slice(n, n + count));
    // An append writes what it added (and tile level 1 its new hashes), not whole tiles again.
    const written = w.sets.reduce((a, x) => a + x.value.length, 0);
    assert.ok(written <= count * (32 + 2 + 24) + 2 * 32, `append of ${count} wrote ${written}`);
    n += count;
    // The root from the stored tiles (what proofs read) equals the edge's own.
    assert.deepEqual(await treeHash(subtreeReader(s.tile), n), edge.root(), `size ${n}`);
    // Another replica loading the edge from the store continues identically.
    if (step % 5 === 0) edge = await Edge.load(n, s.rows);
  }
  // Level-0 tiles are the leaf hashes (full and partial); level-1 hashes are the MTH of 256 leaves.
  assert.equal((await s.tile(0, 2))!.length, TILE_WIDTH * 32);
  const t0 = (await s.tile(0, 3))!;
  assert.equal(t0.length, 44 * 32);
  assert.deepEqual(t0.subarray(32, 64), leaves[3 * TILE_WIDTH + 1]);
  assert.deepEqual((await s.tile(0, 1))!.subarray(255 * 32), leaves[2 * TILE_WIDTH - 1]);
  const t1 = (await s.tile(1, 0))!;
  assert.equal(t1.length, 3 * 32);
  assert.deepEqual(t1.subarray(2 * 32, 3 * 32), mth(leaves.slice(2 * 256, 3 * 256)));
  const b = (await readBundle(s.rows, 3))!.records;
  assert.equal(b.length, 44);
  assert.deepEqual(b[10], entryOf(3 * 256 + 10));
  assert.deepEqual((await readBundle(s.rows, 1))!.records[255], entryOf(2 * 256 - 1));
  s.kv.close();
});

Deno.test("edge: one entry per append keeps at most MAX_CHUNKS rows per tile and bundle", async () => {
  const s = await store();
  let edge = Edge.empty();
  const leaves: Uint8Array[] = [];
  for (let i = 0; i < TILE_WIDTH + 40; i++) {
    await s.apply(edge.append([entryOf(i)]));
    leaves.push(leafHash(entryOf(i)));
    if (i % 37 === 0) edge = await Edge.load(i + 1, s.rows);
  }
  for (const prefix of [tileKey(0, 0), tileKey(0, 1), bundleKey(0), bundleKey(1)]) {
    const rows = await s.count(prefix);
    assert.ok(rows >= 1 && rows <= MAX_CHUNKS, `${prefix.join("/")}: ${rows} rows`);
  }
  assert.deepEqual((await s.tile(0, 0))!, concat(leaves.slice(0, TILE_WIDTH)));
  assert.deepEqual((await s.tile(0, 1))!, concat(leaves.slice(TILE_WIDTH)));
  assert.deepEqual(
    (await readBundle(s.rows, 1))!.records,
    leaves.slice(TILE_WIDTH).map((_, i) => entryOf(TILE_WIDTH + i)),
  );
  assert.deepEqual(await treeHash(subtreeReader(s.tile), TILE_WIDTH + 40), mth(leaves));
  s.kv.close();
});

Deno.test("edge: tiles and bundles stored whole (before chunks) are read, continued and merged", async () => {
  const s = await store();
  const leaves: Uint8Array[] = [];
  const entries = Array.from({ length: 300 }, (_, i) => entryOf(i));
  for (const e of entries) leaves.push(leafHash(e));
  // The old layout at size 270: whole rows at the tiles' and bundles' own keys.
  await s.kv.set(tileKey(0, 0), concat(leaves.slice(0, 256)));
  await s.kv.set(tileKey(0, 1), concat(leaves.slice(256, 270)));
  await s.kv.set(tileKey(1, 0), mth(leaves.slice(0, 256)));
  await s.kv.set(bundleKey(0), framed(entries.slice(0, 256)));
  await s.kv.set(bundleKey(1), framed(entries.slice(256, 270)));
  let edge = await Edge.load(270, s.rows);
  assert.deepEqual(edge.root(), mth(leaves.slice(0, 270)));
  for (let i = 270; i < 300; i++) {
    await s.apply(edge.append([entries[i]]));
    if (i % 7 === 0) edge = await Edge.load(i + 1, s.rows);
  }
  assert.deepEqual(edge.root(), mth(leaves));
  assert.deepEqual(await treeHash(subtreeReader(s.tile), 300), mth(leaves));
  assert.deepEqual((await s.tile(0, 1))!, concat(leaves.slice(256, 300)));
  assert.deepEqual((await readBundle(s.rows, 1))!.records, entries.slice(256, 300));
  // Merged past MAX_CHUNKS: the whole row at the tile's own key went with the chunks.
  assert.equal((await s.kv.get(tileKey(0, 1))).value, null);
  assert.ok(await s.count(tileKey(0, 1)) <= MAX_CHUNKS);
  s.kv.close();
});

function concat(hashes: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(hashes.length * 32);
  hashes.forEach((h, i) => out.set(h, i * 32));
  return out;
}

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
