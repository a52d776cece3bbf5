/**
 * Tiles and entry bundles as KV rows. An append stores only what it added: a
 * chunk row per tile (and bundle) it touched, keyed by that tile and the
 * position of the chunk's first hash (entry). Rewriting the whole partial tile
 * and bundle on every append made the log write about twice what it added
 * (docs/decisions/transparency-log-cadence.md, "Chunks"). A read assembles a
 * tile from its rows in key order; a row at the tile's own key (how tiles were
 * stored before chunks) holds positions from 0 and is read the same way.
 *
 * A bundle chunk holds each entry as it was queued (tiles.ts `encodeQueued`):
 * a receipt's as its 37-byte frame, spelled out when the bundle is served.
 */
import { HASH_BYTES } from "../aci/mod.ts";

export const TLOG = "tlog";
export const tileKey = (level: number, index: number): Deno.KvKey => [TLOG, "tile", level, index];
export const bundleKey = (index: number): Deno.KvKey => [TLOG, "bundle", index];

/**
 * Rows per tile or bundle at most: the append that would go past it writes the
 * tile whole at position 0 and deletes the other rows, so a read stays a few
 * rows however small the appends (one receipt each at c=1).
 */
export const MAX_CHUNKS = 16;

/** Where a row starts: a chunk's position, or -1 for a whole row at the tile's own key. */
export type ChunkStart = number;

export const tileChunkKey = (level: number, index: number, start: ChunkStart): Deno.KvKey =>
  start < 0 ? tileKey(level, index) : [TLOG, "tile", level, index, start];
export const bundleChunkKey = (index: number, start: ChunkStart): Deno.KvKey =>
  start < 0 ? bundleKey(index) : [TLOG, "bundle", index, start];

export interface Row {
  key: Deno.KvKey;
  value: Uint8Array;
}

/** The rows with keys in [start, end), in key order. */
export type RowSource = (start: Deno.KvKey, end: Deno.KvKey) => Promise<Row[]>;

export function kvRows(kv: Deno.Kv): RowSource {
  return async (start, end) => {
    const out: Row[] = [];
    for await (const e of kv.list<Uint8Array>({ start, end })) {
      out.push({ key: e.key, value: e.value });
    }
    return out;
  };
}

/** A stored tile: its hashes from position 0, concatenated, and the rows holding them. */
export interface StoredTile {
  bytes: Uint8Array;
  starts: ChunkStart[];
}

/** A stored bundle: its entries as queued, from position 0, and the rows holding them. */
export interface StoredBundle {
  records: Uint8Array[];
  starts: ChunkStart[];
}

function startOf(row: Row, ownKeyLength: number): ChunkStart {
  if (row.key.length === ownKeyLength) return -1;
  const s = row.key[ownKeyLength];
  if (typeof s !== "number" || !Number.isInteger(s) || s < 0) throw new Error("bad log chunk key");
  return s;
}

/**
 * The tile (level, index) as stored, null when no row holds any of it. Rows
 * overlap only after a merge (same bytes); a gap ends the tile (never written).
 */
export async function readTile(
  rows: RowSource,
  level: number,
  index: number,
): Promise<StoredTile | null> {
  const got = await rows(tileKey(level, index), tileKey(level, index + 1));
  if (got.length === 0) return null;
  const starts = got.map((r) => startOf(r, 4));
  if (got.length === 1 && starts[0] <= 0) return { bytes: got[0].value, starts };
  let hashes = 0;
  const pieces: { at: number; value: Uint8Array }[] = [];
  got.forEach((r, i) => {
    const at = Math.max(0, starts[i]);
    if (r.value.length % HASH_BYTES !== 0) {
      throw new Error(`log tile ${level}/${index} is malformed`);
    }
    const end = at + r.value.length / HASH_BYTES;
    if (at > hashes || end <= hashes) return;
    pieces.push({ at, value: r.value });
    hashes = end;
  });
  const bytes = new Uint8Array(hashes * HASH_BYTES);
  for (const p of pieces) bytes.set(p.value, p.at * HASH_BYTES);
  return { bytes, starts };
}

/** The bundle `index` as stored (entries as queued), null when no row holds any of it. */
export async function readBundle(rows: RowSource, index: number): Promise<StoredBundle | null> {
  const got = await rows(bundleKey(index), bundleKey(index + 1));
  if (got.length === 0) return null;
  const starts = got.map((r) => startOf(r, 3));
  const records: Uint8Array[] = [];
  got.forEach((r, i) => {
    const at = Math.max(0, starts[i]);
    if (at > records.length) return;
    const own = decodeBundle(r.value);
    for (let j = records.length - at; j < own.length; j++) records.push(own[j]);
  });
  return { records, starts };
}

/**
 * The first `count` entries of a bundle (all when omitted); throws on a malformed one. A bundle
 * (C2SP tlog-tiles) is encoded as store/kv_writes.ts `framed` encodes frames: each entry as a
 * big-endian u16 length and its bytes.
 */
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
