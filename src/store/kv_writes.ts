/**
 * Durable mutations as the group committer takes them: the `KvWrite` shape,
 * Deno KV's limits, each write's encoded size (checked against them), and
 * applying and coalescing a batch's writes (src/store/group_commit.ts).
 */
import { Buffer } from "node:buffer";
import { serialize } from "node:v8";

/** One durable mutation. */
export type KvWrite =
  | { op: "set"; key: Deno.KvKey; value: unknown; expireIn?: number }
  | {
    op: "sum";
    key: Deno.KvKey;
    /** May be negative: encoded as a wrapping u64 add (see group_commit.ts's module doc). */
    value: bigint;
  }
  | {
    /**
     * A sum that may be applied later: a committer with deferred sums
     * (store/deferred_sums.ts) records it in the replica's pending row and
     * applies it with others; anywhere else it is a plain `sum`.
     */
    op: "defer";
    key: Deno.KvKey;
    value: bigint;
  }
  | { op: "delete"; key: Deno.KvKey }
  | {
    /**
     * One small record for a shared row: stored as a big-endian u16 length and
     * its bytes. Frames in one commit whose keys share all but their last part
     * (which must be unique per frame) are stored as one row at the first
     * frame's key (see `mergeFrames`): many requests' log entries cost one row.
     */
    op: "frame";
    key: Deno.KvKey;
    value: Uint8Array;
  };

/**
 * Deno KV (2.9) atomic limits, measured: 1000 mutations, 819,200 bytes of keys
 * plus values, 81,920 bytes of keys, 65,536 bytes per value, 2,048 bytes per
 * key. Batches are cut at about 75% of the totals to leave room for the
 * estimate's error; single ops are checked against the exact per-op limits.
 */
export const KV_LIMITS = {
  mutations: 1000,
  totalBytes: 819_200,
  totalKeyBytes: 81_920,
  valueBytes: 65_536,
  keyBytes: 2_048,
} as const;

const U64_MOD = 1n << 64n;

export interface Sized {
  op: KvWrite;
  keyBytes: number;
  bytes: number;
}

// deno-lint-ignore no-control-regex -- NUL is exactly what must be found
const NOT_PLAIN_ASCII = /[^\x01-\x7f]/;
/** Characters V8 cannot store one byte each. */
// deno-lint-ignore no-control-regex -- the range is all one-byte characters
const WIDE_CHAR = /[^\x00-\xff]/;

/** Size of a key part in Deno KV's tuple encoding (type byte, NUL-escaped bytes, terminator). */
function keyPartBytes(part: Deno.KvKeyPart): number {
  if (typeof part === "string") {
    if (!NOT_PLAIN_ASCII.test(part)) return part.length + 2;
    const b = Buffer.from(part, "utf8");
    return b.byteLength + countZeros(b) + 2;
  }
  if (part instanceof Uint8Array) return part.byteLength + countZeros(part) + 2;
  if (typeof part === "number") return 9;
  if (typeof part === "bigint") return 2 + Math.ceil(part.toString(16).length / 2);
  return 1;
}

function countZeros(b: Uint8Array): number {
  let n = 0;
  for (const x of b) if (x === 0) n++;
  return n;
}

function keyBytes(key: Deno.KvKey): number {
  let n = 0;
  for (const p of key) n += keyPartBytes(p);
  return n;
}

/**
 * An upper bound on a value's stored size. JSON text is far cheaper to make
 * than a V8 serialization (which Deno KV does again anyway), and V8's encoding
 * of JSON-shaped data never exceeds three bytes per JSON character (a double
 * like `0.5` is 9 bytes) plus a small
 * header; values JSON cannot encode (bigints, cycles) fall back to measuring.
 */
function valueBytes(value: unknown): number {
  if (value instanceof Deno.KvU64) return 8;
  if (typeof value === "string") return (WIDE_CHAR.test(value) ? 2 : 1) * value.length + 16;
  if (value instanceof Uint8Array) return value.byteLength;
  if (typeof value === "object" && value !== null && hasBinary(value)) {
    return serialize(value).byteLength;
  }
  try {
    const json = JSON.stringify(value);
    if (json !== undefined) return 3 * json.length + 16;
  } catch {
    // not JSON-shaped: measure it exactly below
  }
  return serialize(value).byteLength;
}

/** Typed arrays inside objects serialize compactly but JSON-stringify as large objects: measure those. */
function hasBinary(value: object): boolean {
  for (const v of Object.values(value)) {
    if (ArrayBuffer.isView(v)) return true;
  }
  return false;
}

/** Sizes one op and rejects it when it can never fit any commit. */
export function sizeOp(op: KvWrite): Sized {
  const kb = keyBytes(op.key);
  if (kb > KV_LIMITS.keyBytes) throw new RangeError("KV key too large");
  let vb = 0;
  if (op.op === "set") {
    vb = valueBytes(op.value);
    if (vb > KV_LIMITS.valueBytes) throw new RangeError("KV value too large");
    if (op.expireIn !== undefined && (!Number.isInteger(op.expireIn) || op.expireIn <= 0)) {
      throw new RangeError("expireIn must be a positive integer of milliseconds");
    }
  } else if (op.op === "frame") {
    if (op.value.byteLength > 0xffff) throw new RangeError("KV frame too large");
    vb = op.value.byteLength + 2;
  } else if (op.op === "sum" || op.op === "defer") {
    if (op.value >= U64_MOD || op.value <= -U64_MOD) {
      throw new RangeError("sum value out of u64 range");
    }
    vb = 8;
  }
  return { op, keyBytes: kb, bytes: kb + vb };
}

/** A `defer` as the plain `sum` it is outside a deferring committer; other writes as they are. */
export function asSum(op: KvWrite): KvWrite {
  return op.op === "defer" ? { op: "sum", key: op.key, value: op.value } : op;
}

/** Adds writes to an atomic operation (negative sums as wrapping u64 adds). */
export function applyWrites(atomic: Deno.AtomicOperation, ops: KvWrite[]): void {
  for (const op of ops) {
    if (op.op === "set") {
      atomic.set(op.key, op.value, op.expireIn === undefined ? {} : { expireIn: op.expireIn });
    } else if (op.op === "sum" || op.op === "defer") {
      atomic.sum(op.key, ((op.value % U64_MOD) + U64_MOD) % U64_MOD);
    } else if (op.op === "frame") {
      atomic.set(op.key, framed([op.value]));
    } else {
      atomic.delete(op.key);
    }
  }
}

/**
 * Key parts as exact Map keys: strings, finite non-zero numbers, bigints and
 * booleans are themselves (Map keys compare by type and value); byte strings
 * and numbers Map keys would confuse (-0 with 0) get a tagged text in a map of
 * their own, so they cannot collide with a string part.
 */
interface KeyNode {
  next?: Map<Deno.KvKeyPart, KeyNode>;
  tagged?: Map<string, KeyNode>;
  /** A set or delete in the batch touches this exact key. */
  touched?: boolean;
  sum?: { op: "sum"; key: Deno.KvKey; value: bigint };
  /** The batch's merged `defer` on this key (kept apart from sums: they are applied differently). */
  defer?: { op: "defer"; key: Deno.KvKey; value: bigint };
}

function nodeOf(root: KeyNode, key: Deno.KvKey): KeyNode {
  let n = root;
  for (const p of key) {
    let child: KeyNode | undefined;
    if (p instanceof Uint8Array || (typeof p === "number" && (p === 0 || p !== p))) {
      const tag = p instanceof Uint8Array ? `u${p.join(",")}` : Object.is(p, -0) ? "n-0" : `n${p}`;
      n.tagged ??= new Map();
      child = n.tagged.get(tag);
      if (child === undefined) n.tagged.set(tag, child = {});
    } else {
      n.next ??= new Map();
      child = n.next.get(p);
      if (child === undefined) n.next.set(p, child = {});
    }
    n = child;
  }
  return n;
}

/**
 * Merges `sum` mutations on the same key into one (sums commute, and the
 * commit is all-or-nothing): a group of requests settling on one API key
 * writes each usage counter once instead of once per request. Keys that a
 * `set` or `delete` also touches in the batch are left as they are, in order.
 * Keys are matched through a trie of their parts, not spelled out as text:
 * this runs on every commit over every request's dozen sums.
 */
export function coalesceSums(ops: KvWrite[]): KvWrite[] {
  return mergeFrames(coalesceOnlySums(ops));
}

/**
 * Bytes of one merged row of frames: inside what SQLite stores in the page
 * itself for Deno KV's WITHOUT ROWID table (~1,000 bytes of key and value on
 * a 4 KiB page), so writing and later deleting a row never allocates and
 * frees an overflow page of its own (docs/decisions/transparency-log-cadence.md).
 */
const FRAME_ROW_BYTES = 900;

/** Each record as a big-endian u16 length and its bytes, concatenated. */
export function framed(values: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(values.reduce((a, v) => a + 2 + v.byteLength, 0));
  let pos = 0;
  for (const v of values) {
    out[pos] = v.byteLength >> 8;
    out[pos + 1] = v.byteLength & 0xff;
    out.set(v, pos + 2);
    pos += 2 + v.byteLength;
  }
  return out;
}

/**
 * Turns the `frame` ops of one commit into `set`s: frames whose keys share all
 * but the last part go into rows of at most FRAME_ROW_BYTES, each at the key of
 * its first frame (unique to that frame, so rows of different commits never
 * collide). Other ops pass through in order.
 */
export function mergeFrames(ops: KvWrite[]): KvWrite[] {
  if (!ops.some((o) => o.op === "frame")) return ops;
  const out: KvWrite[] = [];
  // Open rows, one per key prefix: a commit has one or two prefixes, so a list scanned by
  // comparing parts (no text key made per frame).
  type Row = { key: Deno.KvKey; values: Uint8Array[]; bytes: number };
  const open: Row[] = [];
  const flush = (g: Row) => out.push({ op: "set", key: g.key, value: framed(g.values) });
  for (const op of ops) {
    if (op.op !== "frame") {
      out.push(op);
      continue;
    }
    let at = open.findIndex((g) => samePrefix(g.key, op.key));
    if (at >= 0 && open[at].bytes + op.value.byteLength + 2 > FRAME_ROW_BYTES) {
      flush(open[at]);
      open.splice(at, 1);
      at = -1;
    }
    if (at < 0) at = open.push({ key: op.key, values: [], bytes: 0 }) - 1;
    const g = open[at];
    g.values.push(op.value);
    g.bytes += op.value.byteLength + 2;
  }
  for (const g of open) flush(g);
  return out;
}

/** Do two keys agree in all but their last part? (Parts compared as KV orders them.) */
function samePrefix(a: Deno.KvKey, b: Deno.KvKey): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length - 1; i++) if (!samePart(a[i], b[i])) return false;
  return true;
}

function samePart(x: Deno.KvKeyPart, y: Deno.KvKeyPart): boolean {
  if (x instanceof Uint8Array || y instanceof Uint8Array) {
    if (!(x instanceof Uint8Array && y instanceof Uint8Array) || x.length !== y.length) {
      return false;
    }
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
    return true;
  }
  // Same type and value; KV tells -0 from 0 only as a number's bits, which Object.is does too.
  return Object.is(x, y);
}

function coalesceOnlySums(ops: KvWrite[]): KvWrite[] {
  // Only writes that may share a key with a sum need a place in the trie (a
  // receipt row never does: its first key part is no sum's).
  const summed = (op: KvWrite) => op.op === "sum" || op.op === "defer";
  const sumHeads = new Set<Deno.KvKeyPart>();
  for (const op of ops) if (summed(op)) sumHeads.add(op.key[0]);
  if (sumHeads.size === 0) return ops;
  const root: KeyNode = {};
  for (const op of ops) {
    if (!summed(op) && (typeof op.key[0] !== "string" || sumHeads.has(op.key[0]))) {
      nodeOf(root, op.key).touched = true;
    }
  }
  const out: KvWrite[] = [];
  for (const op of ops) {
    if (op.op !== "sum" && op.op !== "defer") {
      out.push(op);
      continue;
    }
    const n = nodeOf(root, op.key);
    if (n.touched) out.push(op);
    else if (op.op === "sum") {
      if (n.sum) n.sum.value += op.value;
      else out.push(n.sum = { op: "sum", key: op.key, value: op.value });
    } else if (n.defer) n.defer.value += op.value;
    else out.push(n.defer = { op: "defer", key: op.key, value: op.value });
  }
  return out;
}
