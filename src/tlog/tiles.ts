/**
 * The log's right edge in memory and what an append stores. The edge — the
 * rightmost, partial tile at every level, the last bundle, and the roots of
 * the tree's complete subtrees (its compact range) — is all an append touches
 * and all the root hash needs. Tiles and bundles are stored as chunk rows
 * (chunks.ts): an append writes the hashes and entries it added, not the
 * whole partial tile again.
 */
import { framed } from "../store/mod.ts";
import {
  emptyRoot,
  HASH_BYTES,
  leafHash,
  nodeHash,
  receiptEntry,
  receiptEntryOfDigest,
  receiptLeafHash,
  sha256Parts,
  type SubtreeReader,
  subtreeReaderOver,
  TILE_HEIGHT,
  TILE_WIDTH,
  tilesAtLevel,
} from "../aci/mod.ts";

import {
  bundleChunkKey,
  type ChunkStart,
  MAX_CHUNKS,
  readBundle,
  readTile,
  type RowSource,
  tileChunkKey,
  TLOG,
} from "./chunks.ts";

export { bundleKey, decodeBundle, kvRows, tileKey, TLOG } from "./chunks.ts";
export type { RowSource } from "./chunks.ts";
export const HEAD_KEY: Deno.KvKey = [TLOG, "head"];
export const COSIGNED_KEY: Deno.KvKey = [TLOG, "cosigned"];
export const PENDING_PREFIX: Deno.KvKey = [TLOG, "pending"];
export const leafKey = (hashHex: string): Deno.KvKey => [TLOG, "leaf", hashHex];
/**
 * Leaf indexes of the entries of one append that were queued in one second
 * (receipts: their `served_at`), in one row: `[TLOG, "at", second, first index]`
 * → `LEAF_REF_BYTES`-byte records (see `packLeafRefs`). A receipt's index is
 * found from its own `served_at` in a handful of rows, with no row per entry.
 */
const LEAF_AT = "at";
export const leafAtPrefix = (second: number): Deno.KvKey => [TLOG, LEAF_AT, second];
export const leafAtKey = (second: number, first: number): Deno.KvKey => [
  TLOG,
  LEAF_AT,
  second,
  first,
];
export const witnessKey = (name: string): Deno.KvKey => [TLOG, "witness", name];

/** The tree head: one KV value, written atomically with the tiles it covers. */
export interface Head {
  size: number;
  root: Uint8Array;
  /** The signed checkpoint (C2SP note) of this size. */
  checkpoint: string;
}

export type TileSource = (level: number, index: number) => Promise<Uint8Array | null>;

/** Reads complete subtrees from tiles (aci/merkle.ts). */
export function subtreeReader(tile: TileSource): SubtreeReader {
  return subtreeReaderOver(async (level, index) => {
    const bytes = await tile(level, index);
    if (bytes === null) throw new Error(`log tile ${level}/${index} is missing`);
    return bytes;
  });
}

/**
 * A pending entry as queued: the entry itself; or — when the entry's second is
 * known — a 0x00 tag, that second as a big-endian u32, and the entry; or, for
 * a receipt (the log's bulk: one per request), a 0x01 tag, its `served_at`
 * second and the receipt's raw SHA-256, 37 bytes, from which the entry is
 * spelled out again when sequenced. Small frames keep a commit's pending row
 * inside its SQLite page (store/kv_writes.ts). Entries are JCS objects and
 * start with "{", never 0x00 or 0x01.
 */
export interface Queued {
  entry: Uint8Array;
  second: number | null;
}

const TAG_SECOND = 0;
const TAG_RECEIPT = 1;
const RECEIPT_FRAME_BYTES = 5 + HASH_BYTES;

export function encodeQueued(entry: Uint8Array, second?: number): Uint8Array {
  if (second === undefined || !validSecond(second)) return entry;
  const out = new Uint8Array(5 + entry.length);
  writeSecond(out, TAG_SECOND, second);
  out.set(entry, 5);
  return out;
}

/** A receipt's compact frame: tag, `served_at` second, the receipt JCS's raw SHA-256. */
export function encodeQueuedReceipt(receiptJcs: string, second: number): Uint8Array {
  if (!validSecond(second)) return encodeQueued(receiptEntry(receiptJcs));
  const out = new Uint8Array(RECEIPT_FRAME_BYTES);
  writeSecond(out, TAG_RECEIPT, second);
  out.set(sha256Parts([receiptJcs]), 5);
  return out;
}

export function decodeQueued(bytes: Uint8Array): Queued {
  const tag = bytes[0];
  if (bytes.length < 5 || (tag !== TAG_SECOND && tag !== TAG_RECEIPT)) {
    return { entry: bytes, second: null };
  }
  const second = readSecond(bytes);
  if (tag === TAG_SECOND) return { entry: bytes.subarray(5), second };
  if (bytes.length !== RECEIPT_FRAME_BYTES) throw new Error("malformed receipt frame");
  return { entry: receiptEntryOfDigest(bytes.subarray(5)), second };
}

/** A queued entry's leaf hash (a view, as merkle.ts `leafHash`'s) and second. */
export interface QueuedLeaf {
  hash: Uint8Array;
  second: number | null;
}

/**
 * What the sequencer needs of a queued entry: a receipt's leaf hash straight
 * from its frame (aci `receiptLeafHash`: the entry is never spelled out), any
 * other's from its decoded entry.
 */
export function queuedLeaf(bytes: Uint8Array): QueuedLeaf {
  if (bytes[0] === TAG_RECEIPT && bytes.length === RECEIPT_FRAME_BYTES) {
    return { hash: receiptLeafHash(bytes, 5), second: readSecond(bytes) };
  }
  const q = decodeQueued(bytes);
  return { hash: leafHash(q.entry), second: q.second };
}

// Unsigned: a second past 2^31 must not turn negative.
const readSecond = (bytes: Uint8Array) =>
  ((bytes[1] << 24) | (bytes[2] << 16) | (bytes[3] << 8) | bytes[4]) >>> 0;

const validSecond = (s: number) => Number.isInteger(s) && s >= 0 && s < 2 ** 32;

function writeSecond(out: Uint8Array, tag: number, second: number): void {
  out[0] = tag;
  out[1] = second >>> 24;
  out[2] = (second >>> 16) & 0xff;
  out[3] = (second >>> 8) & 0xff;
  out[4] = second & 0xff;
}

/** One leaf reference: the leaf index (big-endian u64) and the leaf hash. */
const LEAF_REF_BYTES = 8 + HASH_BYTES;

export function packLeafRefs(refs: readonly { index: number; hash: Uint8Array }[]): Uint8Array {
  const out = new Uint8Array(refs.length * LEAF_REF_BYTES);
  const view = new DataView(out.buffer);
  refs.forEach((r, i) => {
    // A u64 as two u32 halves: no BigInt per entry (indexes stay below 2^53).
    view.setUint32(i * LEAF_REF_BYTES, Math.floor(r.index / 2 ** 32));
    view.setUint32(i * LEAF_REF_BYTES + 4, r.index >>> 0);
    out.set(r.hash, i * LEAF_REF_BYTES + 8);
  });
  return out;
}

/** The index of `hash` among packed leaf references, or null. */
export function findLeafRef(packed: Uint8Array, hash: Uint8Array): number | null {
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  for (let at = 0; at + LEAF_REF_BYTES <= packed.length; at += LEAF_REF_BYTES) {
    let same = true;
    for (let i = 0; i < HASH_BYTES && same; i++) same = packed[at + 8 + i] === hash[i];
    if (same) return Number(view.getBigUint64(at));
  }
  return null;
}

/** What one append changes in KV: chunk rows written, and rows merged away. */
export interface EdgeWrites {
  sets: { key: Deno.KvKey; value: Uint8Array }[];
  deletes: Deno.KvKey[];
}

/** A partial tile (bundle) of the edge: what it holds so far, and the rows holding it. */
interface EdgeTile {
  index: number;
  hashes: Uint8Array[];
  starts: ChunkStart[];
}
interface EdgeBundle {
  index: number;
  /** Entries as queued (a receipt's 37-byte frame): what the bundle's rows hold. */
  records: Uint8Array[];
  starts: ChunkStart[];
}

/** The tile source over stored chunk rows (what proofs and the compact range read). */
export function tileSource(rows: RowSource): TileSource {
  return async (level, index) => (await readTile(rows, level, index))?.bytes ?? null;
}

/** The right edge of a tree of `size` leaves: the partial tile at each level and the last bundle. */
export class Edge {
  size: number;
  levels: EdgeTile[];
  bundle: EdgeBundle;
  /** Roots of the complete subtrees the tree splits into, largest (leftmost) first. */
  peaks: Uint8Array[];

  constructor(size: number, levels: EdgeTile[], bundle: EdgeBundle, peaks: Uint8Array[]) {
    this.size = size;
    this.levels = levels;
    this.bundle = bundle;
    this.peaks = peaks;
  }

  static empty(): Edge {
    return new Edge(
      0,
      [{ index: 0, hashes: [], starts: [] }],
      { index: 0, records: [], starts: [] },
      [],
    );
  }

  /** Loads the edge of a tree of `size` from stored rows. */
  static async load(size: number, rows: RowSource): Promise<Edge> {
    const levels: EdgeTile[] = [];
    for (let level = 0; level === 0 || TILE_WIDTH ** level <= size; level++) {
      const { full, partial } = tilesAtLevel(size, level);
      const hashes: Uint8Array[] = [];
      let starts: ChunkStart[] = [];
      if (partial > 0) {
        const t = await readTile(rows, level, full);
        if (t === null || t.bytes.length < partial * HASH_BYTES) {
          throw new Error(`log tile ${level}/${full} is missing`);
        }
        for (let i = 0; i < partial; i++) {
          hashes.push(t.bytes.slice(i * HASH_BYTES, (i + 1) * HASH_BYTES));
        }
        starts = t.starts;
      }
      levels.push({ index: full, hashes, starts });
    }
    const b = Math.floor(size / TILE_WIDTH);
    const inBundle = size % TILE_WIDTH;
    const bundle: EdgeBundle = { index: b, records: [], starts: [] };
    if (inBundle > 0) {
      const stored = await readBundle(rows, b);
      if (stored === null) throw new Error(`log entry bundle ${b} is missing`);
      if (stored.records.length < inBundle) throw new Error(`log entry bundle ${b} is short`);
      bundle.records = stored.records.slice(0, inBundle).map((r) => r.slice());
      bundle.starts = stored.starts;
    }
    // The compact range, once per load: one complete subtree per set bit of the size.
    const read = subtreeReader(tileSource(rows));
    const peaks: Uint8Array[] = [];
    let start = 0;
    for (let k = Math.floor(Math.log2(Math.max(1, size))) + 1; k >= 0; k--) {
      const span = 2 ** k;
      if (size - start >= span) {
        peaks.push(await read(k, start / span));
        start += span;
      }
    }
    return new Edge(size, levels, bundle, peaks);
  }

  clone(): Edge {
    return new Edge(
      this.size,
      this.levels.map((l) => ({ index: l.index, hashes: [...l.hashes], starts: [...l.starts] })),
      {
        index: this.bundle.index,
        records: [...this.bundle.records],
        starts: [...this.bundle.starts],
      },
      [...this.peaks],
    );
  }

  /** The tree's root hash, from the compact range (RFC 6962: right-heavy fold). */
  root(): Uint8Array {
    if (this.peaks.length === 0) return emptyRoot();
    let r = this.peaks[this.peaks.length - 1];
    for (let i = this.peaks.length - 2; i >= 0; i--) r = nodeHash(this.peaks[i], r);
    return r;
  }

  /**
   * Appends entries (mutating this edge), stored in the bundle as they are;
   * returns the rows to write and the leaf hashes. Two hashes per entry: its
   * leaf hash and, amortized, one node of the compact range — whose nodes at
   * heights 8, 16, … are the hashes tiles one level up hold.
   */
  append(entries: readonly Uint8Array[]): EdgeWrites & { leaves: Uint8Array[] } {
    return this.appendLeaves(entries.map(leafHash), entries);
  }

  /**
   * {@link append} of entries by their leaf hashes, each stored as its
   * `records` item (the sequencer's queued frames).
   */
  appendLeaves(
    hashes: readonly Uint8Array[],
    records: readonly Uint8Array[],
  ): EdgeWrites & { leaves: Uint8Array[] } {
    const writes: EdgeWrites = { sets: [], deletes: [] };
    // Per level, where this append's chunk of the current tile starts.
    const from = new Map<number, number>();
    const push = (level: number, hash: Uint8Array) => {
      if (level === this.levels.length) this.levels.push({ index: 0, hashes: [], starts: [] });
      const t = this.levels[level];
      if (!from.has(level)) from.set(level, t.hashes.length);
      t.hashes.push(hash);
      if (t.hashes.length === TILE_WIDTH) {
        // A full tile is final: its chunk written now (its hash reaches the level above as a peak).
        this.#storeTile(level, t, from.get(level)!, writes);
        this.levels[level] = { index: t.index + 1, hashes: [], starts: [] };
        from.set(level, 0);
      }
    };
    let bundleFrom = this.bundle.records.length;
    hashes.forEach((h, i) => {
      push(0, h);
      // Compact range: the new leaf merges with each complete subtree of its size to its left.
      this.peaks.push(h);
      let height = 0;
      for (let n = this.size; n % 2 === 1; n = Math.floor(n / 2)) {
        const right = this.peaks.pop()!;
        let node = nodeHash(this.peaks.pop()!, right);
        // Hashes this high live long (in peaks and upper tiles): their own bytes, not a slab's.
        if (++height >= TILE_HEIGHT) node = node.slice();
        this.peaks.push(node);
        if (height % TILE_HEIGHT === 0) push(height / TILE_HEIGHT, node);
      }
      this.bundle.records.push(records[i]);
      if (this.bundle.records.length === TILE_WIDTH) {
        this.#storeBundle(bundleFrom, writes);
        this.bundle = { index: this.bundle.index + 1, records: [], starts: [] };
        bundleFrom = 0;
      }
      this.size++;
    });
    for (const [level, start] of from) {
      const t = this.levels[level];
      if (t.hashes.length > start) this.#storeTile(level, t, start, writes);
    }
    if (this.bundle.records.length > bundleFrom) this.#storeBundle(bundleFrom, writes);
    return { ...writes, leaves: [...hashes] };
  }

  #storeTile(level: number, t: EdgeTile, start: number, writes: EdgeWrites): void {
    t.starts = storeChunk(
      t.starts,
      start,
      (s) => tileChunkKey(level, t.index, s),
      (s) => concatHashes(t.hashes, s),
      writes,
    );
  }

  #storeBundle(start: number, writes: EdgeWrites): void {
    const b = this.bundle;
    b.starts = storeChunk(
      b.starts,
      start,
      (s) => bundleChunkKey(b.index, s),
      (s) => framed(b.records.slice(s)),
      writes,
    );
  }
}

/**
 * Writes a tile's (bundle's) content from `start` as a chunk row, or, once it
 * has {@link MAX_CHUNKS} rows, the whole of it at position 0 with its other
 * rows deleted; returns the rows' starts after.
 */
function storeChunk(
  starts: ChunkStart[],
  start: number,
  keyAt: (start: ChunkStart) => Deno.KvKey,
  from: (start: number) => Uint8Array,
  writes: EdgeWrites,
): ChunkStart[] {
  if (starts.length < MAX_CHUNKS) {
    writes.sets.push({ key: keyAt(start), value: from(start) });
    return [...starts, start];
  }
  for (const s of starts) if (s !== 0) writes.deletes.push(keyAt(s));
  writes.sets.push({ key: keyAt(0), value: from(0) });
  return [0];
}

function concatHashes(hashes: readonly Uint8Array[], from: number): Uint8Array {
  const out = new Uint8Array((hashes.length - from) * HASH_BYTES);
  for (let i = from; i < hashes.length; i++) out.set(hashes[i], (i - from) * HASH_BYTES);
  return out;
}
