/**
 * The transparency-log checks a client runs on a receipt's inclusion proof
 * (team contract "Transparency log"), on the log's own primitives
 * (`aci/merkle.ts`, `aci/note.ts`, `aci/log_entry.ts`): the receipt's entry,
 * and the checkpoint, a C2SP signed note whose Ed25519 signature must come
 * from the `c2sp-note-ed25519` key of the attested keyset under the key name
 * equal to the checkpoint's origin.
 */
import { jcs } from "../aci/jcs.ts";
import { receiptEntry as entryOfJcs } from "../aci/log_entry.ts";
import {
  type Checkpoint,
  parseCheckpointBody,
  parseNote,
  parseVerifierKey,
  SIG_ED25519,
  unb64,
  verifierKey,
  verifyNote,
} from "../aci/note.ts";

export type { Checkpoint };

/** The log entry of a receipt: JCS of {"kind":"receipt","receipt_digest":sha256(JCS(receipt))}. */
export function receiptEntry(receipt: unknown): Uint8Array {
  return entryOfJcs(jcs(receipt));
}

/** Decodes a base64 32-byte hash, or null. */
export function decodeHash(s: unknown): Uint8Array | null {
  const b = typeof s === "string" ? unb64(s) : null;
  return b !== null && b.length === 32 ? b : null;
}

/**
 * Verifies a checkpoint note signed by `publicKey` (raw Ed25519) under the
 * key name equal to its origin; returns the checkpoint or why it does not
 * verify. Signatures by other keys (witness cosignatures) are ignored.
 */
export function verifyCheckpoint(note: string, publicKey: Uint8Array): Checkpoint | string {
  const parsed = parseNote(note);
  if (parsed === null) return "checkpoint is not a well-formed signed note";
  const cp = parseCheckpointBody(parsed.text);
  if (cp === null) return "checkpoint body is malformed";
  const key = parseVerifierKey(verifierKey(cp.origin, SIG_ED25519, publicKey));
  if (key === null) return `checkpoint origin ${JSON.stringify(cp.origin)} is not a key name`;
  if (verifyNote(note, [key]) === null) {
    return "checkpoint carries no valid signature by the attested log key";
  }
  return cp;
}
