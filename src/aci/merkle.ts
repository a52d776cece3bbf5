/**
 * RFC 6962 Merkle trees as the transparency log uses them (C2SP tlog-tiles):
 * leaf and node hashing, the tile geometry (height 8, 256 hashes a tile),
 * the tile path encoding, and inclusion and consistency proofs — made from
 * any source of complete-subtree hashes, and checked with no source at all.
 * Pure: no storage, no clock.
 */
import { sha256, sha256Parts } from "./digest.ts";

export const HASH_BYTES = 32;
/** Tile height: each tile holds 2^8 hashes. */
export const TILE_HEIGHT = 8;
export const TILE_WIDTH = 256;

// Hashing through aci/digest.ts (node:crypto here, a browser build in the /verify page).

const LEAF_PREFIX = new Uint8Array([0]);
const NODE_PREFIX = new Uint8Array([1]);

/**
 * SHA-256(0x00 ‖ entry). Leaf and node hashes are read-only views into a
 * shared slab (aci/digest.ts `sha256Parts`): copy one before storing it.
 */
export function leafHash(entry: Uint8Array): Uint8Array {
  return sha256Parts([LEAF_PREFIX, entry]);
}

/** SHA-256(0x01 ‖ left ‖ right), a view like {@link leafHash}'s. */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return sha256Parts([NODE_PREFIX, left, right]);
}

/** The root of the empty tree: SHA-256 of the empty string. */
export function emptyRoot(): Uint8Array {
  return sha256(new Uint8Array(0));
}

/** The Merkle Tree Hash of consecutive hashes treated as leaves' hashes (any count ≥ 1). */
export function hashOfHashes(hashes: readonly Uint8Array[]): Uint8Array {
  if (hashes.length === 0) throw new Error("no hashes");
  if (hashes.length === 1) return hashes[0];
  const k = largestPowerOfTwoBelow(hashes.length);
  return nodeHash(hashOfHashes(hashes.slice(0, k)), hashOfHashes(hashes.slice(k)));
}

/** The largest power of two strictly below n (n ≥ 2). */
function largestPowerOfTwoBelow(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/**
 * Hash of the complete subtree at Merkle `level` (2^level leaves) and `index`
 * (the index-th such subtree from the left). Only ever asked for subtrees that
 * are complete in the tree being proven.
 */
export type SubtreeReader = (level: number, index: number) => Promise<Uint8Array>;

/**
 * A subtree reader over tiles (C2SP tlog-tiles): Merkle level k is tile level
 * ⌊k/8⌋, the hash of 2^(k mod 8) consecutive hashes of that tile.
 */
export function subtreeReaderOver(
  tile: (level: number, index: number) => Promise<Uint8Array>,
): SubtreeReader {
  return async (k, j) => {
    const level = Math.floor(k / TILE_HEIGHT);
    const span = 2 ** (k % TILE_HEIGHT);
    const first = j * span;
    const at = first % TILE_WIDTH;
    const bytes = await tile(level, Math.floor(first / TILE_WIDTH));
    if (bytes.length < (at + span) * HASH_BYTES) {
      throw new Error(`log tile ${level}/${Math.floor(first / TILE_WIDTH)} is missing hashes`);
    }
    const hashes: Uint8Array[] = [];
    for (let i = at; i < at + span; i++) {
      hashes.push(bytes.subarray(i * HASH_BYTES, (i + 1) * HASH_BYTES));
    }
    return hashOfHashes(hashes);
  };
}

/** MTH(D[start:end]) from complete subtrees (start aligned as RFC 6962's recursion leaves it). */
async function rangeHash(
  read: SubtreeReader,
  start: number,
  end: number,
): Promise<Uint8Array> {
  const n = end - start;
  if (n <= 0) throw new Error("empty range");
  const level = Math.log2(n);
  if (Number.isInteger(level) && start % n === 0) return await read(level, start / n);
  const k = largestPowerOfTwoBelow(n);
  return nodeHash(await rangeHash(read, start, start + k), await rangeHash(read, start + k, end));
}

/** The root hash of the tree of `size` leaves. */
export function treeHash(read: SubtreeReader, size: number): Promise<Uint8Array> {
  return size === 0 ? Promise.resolve(emptyRoot()) : rangeHash(read, 0, size);
}

/** RFC 6962 PATH(m, D[0:n]) (RFC 9162 §2.1.3): the inclusion proof of leaf m in a tree of n. */
export async function inclusionProof(
  read: SubtreeReader,
  m: number,
  n: number,
): Promise<Uint8Array[]> {
  if (!(m >= 0 && m < n)) throw new RangeError("leaf index outside the tree");
  const path = async (m: number, start: number, end: number): Promise<Uint8Array[]> => {
    const size = end - start;
    if (size === 1) return [];
    const k = largestPowerOfTwoBelow(size);
    if (m < k) return [...await path(m, start, start + k), await rangeHash(read, start + k, end)];
    return [...await path(m - k, start + k, end), await rangeHash(read, start, start + k)];
  };
  return await path(m, 0, n);
}

/** RFC 6962 PROOF(m, D[0:n]): the consistency proof from size m to size n (0 < m ≤ n). */
export async function consistencyProof(
  read: SubtreeReader,
  m: number,
  n: number,
): Promise<Uint8Array[]> {
  if (!(m >= 0 && m <= n)) throw new RangeError("sizes out of order");
  if (m === 0 || m === n) return [];
  const sub = async (m: number, start: number, end: number, b: boolean): Promise<Uint8Array[]> => {
    const size = end - start;
    if (m === size) return b ? [] : [await rangeHash(read, start, end)];
    const k = largestPowerOfTwoBelow(size);
    if (m <= k) {
      return [...await sub(m, start, start + k, b), await rangeHash(read, start + k, end)];
    }
    return [...await sub(m - k, start + k, end, false), await rangeHash(read, start, start + k)];
  };
  return await sub(m, 0, n, true);
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

/** RFC 9162 §2.1.3.2: does `proof` show leaf `index` with hash `leaf` in the tree (size, root)? */
export function verifyInclusion(
  leaf: Uint8Array,
  index: number,
  size: number,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): boolean {
  if (!(index >= 0 && index < size)) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (p.length !== HASH_BYTES || sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && equal(r, root);
}

/** RFC 9162 §2.1.4.2: does `proof` show the tree (size1, root1) is a prefix of (size2, root2)? */
export function verifyConsistency(
  size1: number,
  size2: number,
  proof: readonly Uint8Array[],
  root1: Uint8Array,
  root2: Uint8Array,
): boolean {
  if (size1 < 0 || size2 < size1) return false;
  if (size1 === size2) return proof.length === 0 && equal(root1, root2);
  if (size1 === 0) return proof.length === 0;
  if (proof.some((p) => p.length !== HASH_BYTES)) return false;
  let path = [...proof];
  // A first tree that is a complete subtree is its own first proof node.
  if ((size1 & (size1 - 1)) === 0) path = [root1, ...path];
  if (path.length === 0) return false;
  let fn = size1 - 1;
  let sn = size2 - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && equal(fr, root1) && equal(sr, root2);
}

/** A tile's coordinates: level, index, and width (256 = full). */
export interface TileRef {
  level: number;
  index: number;
  width: number;
}

/** `x001/x234/067` for 1234067 (C2SP tlog-tiles path elements). */
export function encodeTileIndex(n: number): string {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError("tile index must be ≥ 0");
  let s = String(n % 1000).padStart(3, "0");
  n = Math.floor(n / 1000);
  while (n > 0) {
    s = `x${String(n % 1000).padStart(3, "0")}/${s}`;
    n = Math.floor(n / 1000);
  }
  return s;
}

/**
 * Parses the path segments after `tile/` (`["0","x001","234.p","5"]`);
 * null for anything not in the exact encoding (leading zeros, widths 0 or
 * ≥ 256, a level above 63, a non-final element without `x`).
 */
export function parseTilePath(
  segments: readonly string[],
): (TileRef & { entries: boolean }) | null {
  if (segments.length < 2) return null;
  const [levelSeg, ...rest] = segments;
  let entries = false;
  let level = 0;
  if (levelSeg === "entries") entries = true;
  else if (/^(0|[1-9][0-9]?)$/.test(levelSeg) && Number(levelSeg) <= 63) level = Number(levelSeg);
  else return null;
  let width = TILE_WIDTH;
  let parts = rest;
  const last = rest[rest.length - 1];
  if (rest.length >= 2 && rest[rest.length - 2].endsWith(".p")) {
    if (!/^[1-9][0-9]{0,2}$/.test(last) || Number(last) >= TILE_WIDTH) return null;
    width = Number(last);
    parts = [...rest.slice(0, -2), rest[rest.length - 2].slice(0, -2)];
  }
  if (parts.length === 0 || parts.length > 6) return null;
  // Canonical only (as Go's tlog.ParseTilePath): no leading zero group, one path per tile.
  if (parts.length > 1 && parts[0] === "x000") return null;
  let index = 0;
  for (let i = 0; i < parts.length; i++) {
    const finalPart = i === parts.length - 1;
    const m = (finalPart ? /^([0-9]{3})$/ : /^x([0-9]{3})$/).exec(parts[i]);
    if (!m) return null;
    index = index * 1000 + Number(m[1]);
  }
  return { level, index, width, entries };
}

/**
 * The tiles a tree of `size` leaves consists of at `level`: the full ones
 * (index < fullCount) and at most one partial tile of `partialWidth` (0: none).
 */
export function tilesAtLevel(size: number, level: number): { full: number; partial: number } {
  const perHash = TILE_WIDTH ** level;
  const hashes = Math.floor(size / perHash);
  return { full: Math.floor(hashes / TILE_WIDTH), partial: hashes % TILE_WIDTH };
}

/** Whether a tree of `size` leaves has (or had, for full tiles) tile `t` at some size ≤ `size`. */
export function tileExistsFor(size: number, t: TileRef): boolean {
  const { full, partial } = tilesAtLevel(size, t.level);
  if (t.width === TILE_WIDTH) return t.index < full;
  // A partial tile is served for every width a checkpointed size implied; we
  // allow any width up to the current one (each is a prefix of the same tile).
  if (t.index < full) return true;
  return t.index === full && t.width <= partial;
}
