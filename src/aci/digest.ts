/**
 * SHA-256 digests in the ACI encodings: bare lowercase hex (`report_data`,
 * session ids) and `sha256:<hex>` (`body_hash`, keyset digest). Uses
 * node:crypto because these sit on the request hot path.
 */

import { createHash, type Hash, hash } from "node:crypto";
import { writeLowerHex } from "./hex_digits.ts";

/** Matches an ACI prefixed digest. */
export const PREFIXED_DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

/** Raw SHA-256 of bytes, or of a string's UTF-8 bytes (an array of its own). */
export function sha256(data: Uint8Array | string): Uint8Array {
  const out = new Uint8Array(32);
  writeLowerHex(hash("sha256", data, "hex"), 0, 32, out, 0);
  return out;
}

/**
 * Raw SHA-256 of the concatenated parts (strings as UTF-8), as a read-only 32-byte view into a
 * shared slab: for hashes made by the thousand (the transparency log's leaves
 * and nodes). Measured in Deno 2.9 (docs/decisions/transparency-log-cadence.md):
 * a `Buffer` digest costs ~2.5 µs more than a hex one, and every small
 * `Uint8Array` another ~1.4 µs (its own backing store), about what the hash
 * itself costs. A view keeps its slab alive and is serialized with all of it:
 * copy (`slice`) one that is kept for long or stored.
 */
export function sha256Parts(parts: readonly (Uint8Array | string)[]): Uint8Array {
  if (slabAt === slab.length) {
    slab = new Uint8Array(SLAB_BYTES);
    slabAt = 0;
  }
  const at = slabAt;
  slabAt += 32;
  const one = joined(parts);
  writeLowerHex(one === null ? incremental(parts) : hash("sha256", one, "hex"), 0, 32, slab, at);
  return slab.subarray(at, at + 32);
}

const SLAB_BYTES = 32 * 128;
let slab = new Uint8Array(SLAB_BYTES);
let slabAt = 0;

/**
 * The parts as one input for node:crypto's one-shot `hash` (a third cheaper
 * than a `Hash` object for a node's 65 bytes, measured in Deno 2.9): one part
 * as it is, small byte parts copied into a scratch buffer reused call after
 * call; null for parts better hashed incrementally.
 */
function joined(parts: readonly (Uint8Array | string)[]): Uint8Array | string | null {
  if (parts.length === 1) return parts[0];
  let n = 0;
  for (const p of parts) {
    if (typeof p === "string") return null;
    n += p.byteLength;
  }
  if (n > SCRATCH_BYTES) return null;
  let at = 0;
  for (const p of parts as readonly Uint8Array[]) {
    scratch.set(p, at);
    at += p.byteLength;
  }
  return scratch.subarray(0, n);
}

const SCRATCH_BYTES = 1024;
const scratch = new Uint8Array(SCRATCH_BYTES);

/** Large or mixed parts: hashed as they are, not copied. */
function incremental(parts: readonly (Uint8Array | string)[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest("hex");
}

/** Lowercase hex SHA-256 of bytes, or of a string's UTF-8 bytes. */
export function sha256Hex(data: Uint8Array | string): string {
  return hash("sha256", data, "hex");
}

/** `sha256:<lowercase hex>` of bytes, or of a string's UTF-8 bytes. */
export function sha256Prefixed(data: Uint8Array | string): string {
  return "sha256:" + sha256Hex(data);
}

/**
 * Incremental SHA-256 over a byte stream (e.g. the raw SSE bytes written to
 * a client), so bodies are hashed exactly as observed without buffering them.
 * `digest()` finalizes; a later `update` throws, a later `digest` repeats the value.
 */
export class BodyHasher {
  #hash: Hash = createHash("sha256");
  #bytes = 0;
  #final: string | null = null;

  /** Adds the next chunk, in wire order. */
  update(chunk: Uint8Array): void {
    if (this.#final !== null) throw new Error("BodyHasher already finalized");
    this.#hash.update(chunk);
    this.#bytes += chunk.byteLength;
  }

  /** Number of bytes hashed so far. */
  get byteCount(): number {
    return this.#bytes;
  }

  /** `sha256:<hex>` of everything passed to `update`. */
  digest(): string {
    if (this.#final === null) this.#final = "sha256:" + this.#hash.digest("hex");
    return this.#final;
  }
}
