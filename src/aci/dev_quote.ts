/**
 * The development "quote" used where no TEE exists: the ASCII magic
 * `DEV-NO-TEE-QUOTE v1` ‖ the 64-byte report-data slot ‖ sha256 over both.
 * It lets a client check the report-data binding end to end, but it is
 * unmistakably not hardware evidence: nothing signs it, and no TDX/SNP parser
 * accepts it.
 */

import { sha256 } from "./digest.ts";
import { bytesEqual } from "./hex.ts";

/** The `tee_type` of development quotes: plainly not a hardware type. */
export const DEV_TEE_TYPE = "dev-insecure-no-tee";

/** The ASCII magic that opens a development quote (no terminator). */
export const DEV_QUOTE_MAGIC = "DEV-NO-TEE-QUOTE v1";

const MAGIC_BYTES = new TextEncoder().encode(DEV_QUOTE_MAGIC);
/** Total length of a development quote: magic, 64-byte slot, 32-byte digest. */
export const DEV_QUOTE_LENGTH = MAGIC_BYTES.length + 64 + 32;

/** Builds a development quote over a 64-byte report-data slot. */
export function devQuote(slot: Uint8Array): Uint8Array {
  if (slot.length !== 64) throw new Error("report-data slot must be 64 bytes");
  const out = new Uint8Array(DEV_QUOTE_LENGTH);
  out.set(MAGIC_BYTES);
  out.set(slot, MAGIC_BYTES.length);
  out.set(sha256(out.subarray(0, MAGIC_BYTES.length + 64)), MAGIC_BYTES.length + 64);
  return out;
}

/** Whether `bytes` starts with the development-quote magic. */
export function isDevQuote(bytes: Uint8Array): boolean {
  return bytes.length >= MAGIC_BYTES.length &&
    bytesEqual(bytes.subarray(0, MAGIC_BYTES.length), MAGIC_BYTES);
}

/** The slot carried by a development quote; throws when the length or digest is wrong. */
export function parseDevQuote(bytes: Uint8Array): Uint8Array {
  if (!isDevQuote(bytes)) throw new Error("not a development quote");
  if (bytes.length !== DEV_QUOTE_LENGTH) throw new Error("development quote has the wrong length");
  const body = bytes.subarray(0, MAGIC_BYTES.length + 64);
  if (!bytesEqual(sha256(body), bytes.subarray(MAGIC_BYTES.length + 64))) {
    throw new Error("development quote digest does not match");
  }
  return bytes.slice(MAGIC_BYTES.length, MAGIC_BYTES.length + 64);
}
