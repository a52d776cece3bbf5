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
  | { op: "delete"; key: Deno.KvKey };

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
  } else if (op.op === "sum") {
    if (op.value >= U64_MOD || op.value <= -U64_MOD) {
      throw new RangeError("sum value out of u64 range");
    }
    vb = 8;
  }
  return { op, keyBytes: kb, bytes: kb + vb };
}

/** Adds writes to an atomic operation (negative sums as wrapping u64 adds). */
export function applyWrites(atomic: Deno.AtomicOperation, ops: KvWrite[]): void {
  for (const op of ops) {
    if (op.op === "set") {
      atomic.set(op.key, op.value, op.expireIn === undefined ? {} : { expireIn: op.expireIn });
    } else if (op.op === "sum") {
      atomic.sum(op.key, ((op.value % U64_MOD) + U64_MOD) % U64_MOD);
    } else {
      atomic.delete(op.key);
    }
  }
}

/**
 * Merges `sum` mutations on the same key into one (sums commute, and the
 * commit is all-or-nothing): a group of requests settling on one API key
 * writes each usage counter once instead of once per request. Keys that a
 * `set` or `delete` also touches in the batch are left as they are, in order.
 */
export function coalesceSums(ops: KvWrite[]): KvWrite[] {
  const keyOf = (k: Deno.KvKey) => {
    let out = "";
    for (const p of k) {
      out += typeof p === "string"
        ? `s${p.length}:${p}`
        : p instanceof Uint8Array
        ? `u${p.length}:${[...p].join(",")}`
        : `${typeof p}:${String(p)};`;
    }
    return out;
  };
  // Only writes that may share a key with a sum need their key spelled out (a
  // receipt row never does: its first key part is no sum's).
  const sumHeads = new Set<string>();
  for (const op of ops) {
    const head = op.key[0];
    if (op.op === "sum" && typeof head === "string") sumHeads.add(head);
  }
  const touched = new Set<string>();
  for (const op of ops) {
    const head = op.key[0];
    if (op.op !== "sum" && (typeof head !== "string" || sumHeads.has(head))) {
      touched.add(keyOf(op.key));
    }
  }
  const merged = new Map<string, { op: "sum"; key: Deno.KvKey; value: bigint }>();
  const out: KvWrite[] = [];
  for (const op of ops) {
    if (op.op !== "sum") {
      out.push(op);
      continue;
    }
    const k = keyOf(op.key);
    if (touched.has(k)) {
      out.push(op);
      continue;
    }
    const m = merged.get(k);
    if (m) m.value += op.value;
    else {
      const first = { op: "sum" as const, key: op.key, value: op.value };
      merged.set(k, first);
      out.push(first);
    }
  }
  return out;
}
