/**
 * The transparency log's entries: the UTF-8 JCS of one small object naming a
 * digest (docs/decisions/transparency-log-entries.md). Digests only: nothing
 * in an entry reveals a prompt, a completion, a key or a body.
 */
import { sha256Prefixed } from "./digest.ts";
import { jcsBytes } from "./jcs.ts";

export type LogEntry =
  | { kind: "receipt"; receipt_digest: string }
  | { kind: "session"; session_id: string }
  | { kind: "keyset"; keyset_digest: string; report_digest: string };

export function receiptEntry(receiptJcs: string): Uint8Array {
  return jcsBytes({ kind: "receipt", receipt_digest: sha256Prefixed(receiptJcs) });
}

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
