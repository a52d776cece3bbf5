/**
 * Browser build of src/aci/digest.ts (same exports), swapped in by the
 * /verify page's bundle (enclave/build_verify_page.ts): the verify library
 * is synchronous, WebCrypto's digest is not, so the bundle hashes with
 * @noble/hashes; the page then re-checks the body hashes with WebCrypto
 * (page.ts).
 */
import { sha256 as nobleSha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "./hex.ts";

export const PREFIXED_DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

const utf8 = (d: Uint8Array | string) => typeof d === "string" ? new TextEncoder().encode(d) : d;

export function sha256(data: Uint8Array | string): Uint8Array {
  return nobleSha256(utf8(data));
}

/** Raw SHA-256 of the concatenated parts (see src/aci/digest.ts: there a view into a slab). */
export function sha256Parts(parts: readonly (Uint8Array | string)[]): Uint8Array {
  const h = nobleSha256.create();
  for (const p of parts) h.update(utf8(p));
  return h.digest();
}

export function sha256Hex(data: Uint8Array | string): string {
  return bytesToHex(sha256(data));
}

export function sha256Prefixed(data: Uint8Array | string): string {
  return "sha256:" + sha256Hex(data);
}

export class BodyHasher {
  #hash = nobleSha256.create();
  #bytes = 0;
  #final: string | null = null;

  update(chunk: Uint8Array): void {
    if (this.#final !== null) throw new Error("BodyHasher already finalized");
    this.#hash.update(chunk);
    this.#bytes += chunk.byteLength;
  }

  get byteCount(): number {
    return this.#bytes;
  }

  digest(): string {
    if (this.#final === null) this.#final = "sha256:" + bytesToHex(this.#hash.digest());
    return this.#final;
  }
}
