/**
 * The log's tiles in KV and its right edge in memory. Stored: each tile
 * (level, index) as the concatenation of its hashes, grown in place until
 * full, and each entry bundle the same way (u16 length-prefixed entries), so
 * a tile or bundle request is one KV read and a slice. The edge — the
 * rightmost, partial tile at every level and the last bundle — is all an
 * append touches and all the root hash needs.
 */
import {
  HASH_BYTES,
  hashOfHashes,
  leafHash,
  type SubtreeReader,
  subtreeReaderOver,
  TILE_WIDTH,
  tilesAtLevel,
} from "../aci/merkle.ts";

export const TLOG = "tlog";
export const HEAD_KEY: Deno.KvKey = [TLOG, "head"];
export const COSIGNED_KEY: Deno.KvKey = [TLOG, "cosigned"];
export const PENDING_PREFIX: Deno.KvKey = [TLOG, "pending"];
export const tileKey = (level: number, index: number): Deno.KvKey => [TLOG, "tile", level, index];
export const bundleKey = (index: number): Deno.KvKey => [TLOG, "bundle", index];
export const leafKey = (hashHex: string): Deno.KvKey => [TLOG, "leaf", hashHex];
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

/** Encodes entries as a bundle: each as a big-endian u16 length and its bytes. */
export function encodeBundle(entries: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(entries.reduce((a, e) => a + 2 + e.length, 0));
  let pos = 0;
  for (const e of entries) {
    out[pos] = e.length >> 8;
    out[pos + 1] = e.length & 0xff;
    out.set(e, pos + 2);
    pos += 2 + e.length;
  }
  return out;
}

/** The first `count` entries of a bundle (all when omitted); throws on a malformed one. */
export function decodeBundle(bytes: Uint8Array, count = Infinity): Uint8Array[] {
  const out: Uint8Array[] = [];
  let pos = 0;
  while (pos < bytes.length && out.length < count) {
    if (pos + 2 > bytes.length) throw new Error("truncated entry bundle");
    const n = (bytes[pos] << 8) | bytes[pos + 1];
    if (pos + 2 + n > bytes.length) throw new Error("truncated entry bundle");
    out.push(bytes.subarray(pos + 2, pos + 2 + n));
    pos += 2 + n;
  }
  return out;
}

/** The byte length of the first `count` entries of a bundle. */
export function bundlePrefixLength(bytes: Uint8Array, count: number): number {
  let pos = 0;
  for (let i = 0; i < count; i++) {
    if (pos + 2 > bytes.length) return -1;
    pos += 2 + ((bytes[pos] << 8) | bytes[pos + 1]);
  }
  return pos <= bytes.length ? pos : -1;
}

/** What one append changes in KV: the tiles and the bundle it wrote (whole values). */
export interface EdgeWrites {
  tiles: { level: number; index: number; bytes: Uint8Array }[];
  bundles: { index: number; bytes: Uint8Array }[];
}

interface EdgeTile {
  index: number;
  hashes: Uint8Array[];
}

/** The right edge of a tree of `size` leaves: the partial tile at each level and the last bundle. */
export class Edge {
  size: number;
  levels: EdgeTile[];
  bundle: { index: number; entries: Uint8Array[] };

  constructor(size: number, levels: EdgeTile[], bundle: { index: number; entries: Uint8Array[] }) {
    this.size = size;
    this.levels = levels;
    this.bundle = bundle;
  }

  static empty(): Edge {
    return new Edge(0, [{ index: 0, hashes: [] }], { index: 0, entries: [] });
  }

  /** Loads the edge of a tree of `size` from stored tiles. */
  static async load(size: number, tile: TileSource, bundle: TileSource): Promise<Edge> {
    const levels: EdgeTile[] = [];
    for (let level = 0; level === 0 || TILE_WIDTH ** level <= size; level++) {
      const { full, partial } = tilesAtLevel(size, level);
      const hashes: Uint8Array[] = [];
      if (partial > 0) {
        const bytes = await tile(level, full);
        if (bytes === null || bytes.length < partial * HASH_BYTES) {
          throw new Error(`log tile ${level}/${full} is missing`);
        }
        for (let i = 0; i < partial; i++) {
          hashes.push(bytes.slice(i * HASH_BYTES, (i + 1) * HASH_BYTES));
        }
      }
      levels.push({ index: full, hashes });
    }
    const b = Math.floor(size / TILE_WIDTH);
    const inBundle = size % TILE_WIDTH;
    let entries: Uint8Array[] = [];
    if (inBundle > 0) {
      const bytes = await bundle(0, b);
      if (bytes === null) throw new Error(`log entry bundle ${b} is missing`);
      entries = decodeBundle(bytes, inBundle).map((e) => e.slice());
      if (entries.length !== inBundle) throw new Error(`log entry bundle ${b} is short`);
    }
    return new Edge(size, levels, { index: b, entries });
  }

  clone(): Edge {
    return new Edge(
      this.size,
      this.levels.map((l) => ({ index: l.index, hashes: [...l.hashes] })),
      { index: this.bundle.index, entries: [...this.bundle.entries] },
    );
  }

  /** Appends entries (mutating this edge); returns the tiles and bundles to store and the leaf hashes. */
  append(entries: readonly Uint8Array[]): EdgeWrites & { leaves: Uint8Array[] } {
    const writes: EdgeWrites = { tiles: [], bundles: [] };
    const leaves: Uint8Array[] = [];
    // Levels whose current (partial) tile changed, written once at the end.
    const touched = new Set<number>();
    let bundleTouched = false;
    for (const entry of entries) {
      const h = leafHash(entry);
      leaves.push(h);
      this.bundle.entries.push(entry);
      bundleTouched = true;
      if (this.bundle.entries.length === TILE_WIDTH) {
        writes.bundles.push({ index: this.bundle.index, bytes: encodeBundle(this.bundle.entries) });
        this.bundle = { index: this.bundle.index + 1, entries: [] };
        bundleTouched = false;
      }
      let carry: Uint8Array | null = h;
      for (let level = 0; carry !== null; level++) {
        if (level === this.levels.length) this.levels.push({ index: 0, hashes: [] });
        const t = this.levels[level];
        t.hashes.push(carry);
        touched.add(level);
        carry = null;
        if (t.hashes.length === TILE_WIDTH) {
          // A full tile is final: written now, and its hash goes one level up.
          writes.tiles.push({ level, index: t.index, bytes: concatHashes(t.hashes) });
          carry = hashOfHashes(t.hashes);
          this.levels[level] = { index: t.index + 1, hashes: [] };
          touched.delete(level);
        }
      }
      this.size++;
    }
    for (const level of touched) {
      const t = this.levels[level];
      writes.tiles.push({ level, index: t.index, bytes: concatHashes(t.hashes) });
    }
    if (bundleTouched) {
      writes.bundles.push({ index: this.bundle.index, bytes: encodeBundle(this.bundle.entries) });
    }
    return { ...writes, leaves };
  }

  /** Reads the edge's own (partial) tiles: enough for the root hash. */
  reader(): SubtreeReader {
    return subtreeReader((level, index) => {
      const t = this.levels[level];
      return Promise.resolve(t && t.index === index ? concatHashes(t.hashes) : null);
    });
  }
}

function concatHashes(hashes: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(hashes.length * HASH_BYTES);
  hashes.forEach((h, i) => out.set(h, i * HASH_BYTES));
  return out;
}
