/**
 * The transparency log's entries: the UTF-8 JCS of one small object naming a
 * digest (docs/decisions/transparency-log-entries.md). Digests only: nothing
 * in an entry reveals a prompt, a completion, a key or a body.
 */
import { sha256Parts, sha256Prefixed } from "./digest.ts";
import { bytesToHex } from "./hex.ts";
import { writeHexDigits } from "./hex_digits.ts";
import { jcsBytes } from "./jcs.ts";

export type LogEntry =
  | { kind: "receipt"; receipt_digest: string }
  | { kind: "session"; session_id: string }
  | { kind: "keyset"; keyset_digest: string; report_digest: string };

const utf8 = new TextEncoder();

export function receiptEntry(receiptJcs: string): Uint8Array {
  return receiptEntryOf(sha256Prefixed(receiptJcs));
}

/** {@link receiptEntry} from the receipt's raw SHA-256 (the log's compact pending frames). */
export function receiptEntryOfDigest(digest: Uint8Array): Uint8Array {
  return receiptEntryOf("sha256:" + bytesToHex(digest));
}

// The JCS of { kind, receipt_digest } spelled out (keys in order, a digest needs no
// escapes): made for every receipt, and the unit test holds it to `jcsBytes`.
function receiptEntryOf(prefixedDigest: string): Uint8Array {
  return utf8.encode(`{"kind":"receipt","receipt_digest":"${prefixedDigest}"}`);
}

/**
 * The RFC 6962 leaf hash of a receipt's entry, SHA-256(0x00 ‖ entry), from the
 * receipt's raw SHA-256 (at `from` in `digest`): the entry spelled into a
 * buffer reused call after call, with no string or array made (the sequencer
 * does this for every receipt). A view like merkle.ts `leafHash`'s.
 */
export function receiptLeafHash(digest: Uint8Array, from = 0): Uint8Array {
  writeHexDigits(digest, from, 32, receiptLeaf, RECEIPT_LEAF_HEAD.length);
  return sha256Parts([receiptLeaf]);
}

const RECEIPT_LEAF_HEAD = utf8.encode('\0{"kind":"receipt","receipt_digest":"sha256:');
const receiptLeaf = new Uint8Array(RECEIPT_LEAF_HEAD.length + 64 + 2);
receiptLeaf.set(RECEIPT_LEAF_HEAD);
receiptLeaf.set(utf8.encode('"}'), RECEIPT_LEAF_HEAD.length + 64);

export function sessionEntry(sessionId: string): Uint8Array {
  return jcsBytes({ kind: "session", session_id: sessionId });
}

export function keysetEntry(keysetDigest: string, report: unknown): Uint8Array {
  return jcsBytes({
    kind: "keyset",
    keyset_digest: keysetDigest,
    report_digest: sha256Prefixed(jcsBytes(report)),
  });
}

/** Parses an entry's bytes; null when it is not one of the three kinds exactly. */
export function parseLogEntry(bytes: Uint8Array): LogEntry | null {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    return null;
  }
  if (typeof v !== "object" || v === null) return null;
  const o = v as Record<string, unknown>;
  const digest = (x: unknown) => typeof x === "string" && /^sha256:[0-9a-f]{64}$/.test(x);
  const keys = Object.keys(o).sort().join(",");
  if (o.kind === "receipt" && keys === "kind,receipt_digest" && digest(o.receipt_digest)) {
    return o as LogEntry;
  }
  if (
    o.kind === "session" && keys === "kind,session_id" && typeof o.session_id === "string" &&
    /^[0-9a-f]{64}$/.test(o.session_id)
  ) return o as LogEntry;
  if (
    o.kind === "keyset" && keys === "keyset_digest,kind,report_digest" &&
    digest(o.keyset_digest) && digest(o.report_digest)
  ) return o as LogEntry;
  return null;
}
