/**
 * The JCS (RFC 8785) form of a receipt, built directly for the receipt's
 * known shape instead of by the generic `canonicalize` walk: the member order
 * is fixed (the ten members sorted once, here), strings and numbers are
 * serialized exactly as JCS does (ECMAScript `JSON.stringify` of a
 * well-formed string, of a finite number), and only the events' members are
 * sorted per receipt. Anything outside the known shape (an extra member, a
 * nested value in an event, a `toJSON`) falls back to the generic `jcs`, so
 * the bytes are the generic ones in every case; receipt_jcs_test.ts checks
 * that on thousands of generated receipts.
 *
 * The form comes in two halves around where `signature` sorts (after
 * `served_at`, before `workload_keyset_digest`): the signing input is the
 * halves joined, the signed receipt's JCS is the halves around the signature
 * member, so the stored row needs no second serialization.
 */
import { jcs } from "./jcs.ts";

/** The receipt's JCS text without `signature`, split where `signature` goes. */
export interface ReceiptJcsHalves {
  /** From `{` through the `served_at` member. */
  head: string;
  /** From `,"workload_keyset_digest":` through `}`. */
  tail: string;
}

const MEMBERS = 10;

function str(s: string): string {
  // JCS forbids lone surrogates (JSON.stringify would escape them).
  if (!s.isWellFormed()) throw new Error("Lone surrogate is not allowed");
  return JSON.stringify(s);
}

function strOrNull(v: unknown): string | undefined {
  if (v === null) return "null";
  return typeof v === "string" ? str(v) : undefined;
}

/** A primitive member value's JCS text; undefined when the value needs the generic path. */
function primitive(v: unknown): string | undefined {
  switch (typeof v) {
    case "string":
      return str(v);
    case "number":
      if (!Number.isFinite(v)) throw new Error("non-finite number in a receipt");
      return JSON.stringify(v);
    case "boolean":
      return v ? "true" : "false";
    default:
      return v === null ? "null" : undefined;
  }
}

/** One event's JCS text: sorted members, primitive values; otherwise the generic form. */
function eventJcs(e: unknown): string {
  if (typeof e !== "object" || e === null || Array.isArray(e)) return jcs(e);
  const rec = e as Record<string, unknown>;
  if (typeof rec.toJSON === "function") return jcs(e);
  const keys = Object.keys(rec).sort();
  let out = "{";
  let first = true;
  for (const k of keys) {
    const v = rec[k];
    if (v === undefined) continue; // JCS (like JSON.stringify) omits it
    const p = primitive(v);
    if (p === undefined) return jcs(e);
    out += (first ? "" : ",") + str(k) + ":" + p;
    first = false;
  }
  return out + "}";
}

/**
 * The two halves of `r`'s JCS form (without `signature`), or null when `r` is
 * not of the receipt's plain known shape (then use the generic `jcs`).
 */
export function receiptJcsHalves(r: object): ReceiptJcsHalves | null {
  const o = r as Record<string, unknown>;
  if (Object.keys(o).length !== MEMBERS || typeof o.toJSON === "function") return null;
  const { served_at: servedAt, event_log: events } = o;
  if (typeof servedAt !== "number" || !Number.isFinite(servedAt) || !Array.isArray(events)) {
    return null;
  }
  const apiVersion = strOrNull(o.api_version);
  const chatId = strOrNull(o.chat_id);
  const endpoint = strOrNull(o.endpoint);
  const keyId = strOrNull(o.key_id);
  const method = strOrNull(o.method);
  const model = strOrNull(o.model);
  const receiptId = strOrNull(o.receipt_id);
  const digest = strOrNull(o.workload_keyset_digest);
  if (
    apiVersion === undefined || chatId === undefined || endpoint === undefined ||
    keyId === undefined || method === undefined || model === undefined ||
    receiptId === undefined || digest === undefined
  ) return null;
  let log = "[";
  for (let i = 0; i < events.length; i++) {
    // Arrays render holes and values without a JSON form as null, as the generic form does.
    const e: unknown = events[i];
    const none = e === undefined || typeof e === "function" || typeof e === "symbol";
    log += (i === 0 ? "" : ",") + (none ? "null" : eventJcs(e));
  }
  log += "]";
  return {
    head: `{"api_version":${apiVersion},"chat_id":${chatId},"endpoint":${endpoint},` +
      `"event_log":${log},"key_id":${keyId},"method":${method},"model":${model},` +
      `"receipt_id":${receiptId},"served_at":${JSON.stringify(servedAt)}`,
    tail: `,"workload_keyset_digest":${digest}}`,
  };
}

/** JCS of the receipt without `signature` (the signing input's text). */
export function receiptJcs(r: object): string {
  const h = receiptJcsHalves(r);
  return h === null ? jcs(r) : h.head + h.tail;
}
