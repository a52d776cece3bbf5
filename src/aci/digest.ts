/**
 * SHA-256 digests in the ACI encodings: bare lowercase hex (`report_data`,
 * session ids) and `sha256:<hex>` (`body_hash`, keyset digest). Uses
 * node:crypto because these sit on the request hot path.
 */

import { createHash, type Hash } from "node:crypto";

/** Matches an ACI prefixed digest. */
export const PREFIXED_DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

/** Raw SHA-256 of bytes, or of a string's UTF-8 bytes. */
export function sha256(data: Uint8Array | string): Uint8Array {
  return new Uint8Array(createHash("sha256").update(data).digest());
}

/** Lowercase hex SHA-256 of bytes, or of a string's UTF-8 bytes. */
export function sha256Hex(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
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
