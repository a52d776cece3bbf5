/**
 * Transparency-log checks a client runs on a receipt's inclusion proof
 * (docs/team CONTRACTS "Transparency log"): the entry's RFC 6962 leaf hash,
 * the inclusion proof against a checkpoint's root (RFC 9162 §2.1.3.2), and the
 * checkpoint itself, a C2SP signed note (tlog-checkpoint) whose Ed25519
 * signature must come from the `c2sp-note-ed25519` key of the attested keyset.
 */
import { concatBytes } from "../aci/bytes.ts";
import { sha256, sha256Prefixed } from "../aci/digest.ts";
import { ed25519Verify } from "../aci/ed25519.ts";
import { bytesEqual } from "../aci/hex.ts";
import { jcsBytes } from "../aci/jcs.ts";

/** The log entry of a receipt: JCS of {"kind":"receipt","receipt_digest":…}. */
export function receiptEntry(receipt: unknown): Uint8Array {
  return jcsBytes({ kind: "receipt", receipt_digest: sha256Prefixed(jcsBytes(receipt)) });
}

/** RFC 6962 leaf hash: SHA-256(0x00 ‖ entry). */
export function leafHash(entry: Uint8Array): Uint8Array {
  return sha256(concatBytes([new Uint8Array([0]), entry]));
}

/** RFC 6962 interior node: SHA-256(0x01 ‖ left ‖ right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return sha256(concatBytes([new Uint8Array([1]), left, right]));
}

/**
 * The root an inclusion proof yields for `leaf` at `index` in a tree of
 * `size` leaves (RFC 9162 §2.1.3.2), or null when the proof's length or shape
 * is wrong for that position.
 */
export function rootFromInclusionProof(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
): Uint8Array | null {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) {
    return null;
  }
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (p.length !== 32 || sn === 0) return null;
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
  return sn === 0 ? r : null;
}

/** A checkpoint whose signature verified. */
export interface Checkpoint {
  origin: string;
  size: number;
  root: Uint8Array;
}

const MAX_NOTE = 64 * 1024;

/** The 4-byte key hash of a signed-note Ed25519 key: SHA-256(name ‖ "\n" ‖ 0x01 ‖ key)[:4]. */
export function noteKeyHash(name: string, publicKey: Uint8Array): Uint8Array {
  return sha256(
    concatBytes([new TextEncoder().encode(`${name}\n`), new Uint8Array([1]), publicKey]),
  )
    .subarray(0, 4);
}

function fromBase64(s: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) return null;
  try {
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/** Decodes a base64 32-byte hash, or null. */
export function decodeHash(s: unknown): Uint8Array | null {
  const b = typeof s === "string" ? fromBase64(s) : null;
  return b !== null && b.length === 32 ? b : null;
}

/**
 * Verifies a C2SP checkpoint note signed by `publicKey` (raw Ed25519) under
 * the key name equal to the checkpoint's origin; returns the checkpoint or
 * why it does not verify. Signatures by other keys are ignored (cosigners).
 */
export function verifyCheckpoint(note: string, publicKey: Uint8Array): Checkpoint | string {
  if (note.length > MAX_NOTE) return "checkpoint note is too large";
  const split = note.lastIndexOf("\n\n");
  if (split < 0) return "checkpoint is not a signed note (no blank line)";
  const body = note.slice(0, split + 1);
  const sigLines = note.slice(split + 2).split("\n");
  if (sigLines.at(-1) !== "") return "signed note does not end with a newline";
  const lines = body.split("\n").slice(0, -1);
  if (lines.length < 3) return "checkpoint body has fewer than three lines";
  const [origin, sizeText, rootText] = lines;
  if (origin === "" || !/^(0|[1-9][0-9]{0,15})$/.test(sizeText)) {
    return "checkpoint origin or size is malformed";
  }
  const size = Number(sizeText);
  const root = decodeHash(rootText);
  if (root === null || !Number.isSafeInteger(size)) return "checkpoint root hash is malformed";
  const wantHash = noteKeyHash(origin, publicKey);
  const message = new TextEncoder().encode(body);
  for (const line of sigLines.slice(0, -1)) {
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m || m[1] !== origin) continue;
    const sig = fromBase64(m[2]);
    if (sig === null || sig.length !== 68 || !bytesEqual(sig.subarray(0, 4), wantHash)) continue;
    if (ed25519Verify(publicKey, sig.subarray(4), message)) return { origin, size, root };
    return "checkpoint signature by the attested log key does not verify";
  }
  return "checkpoint carries no signature by the attested log key";
}
