/**
 * Signing, storing and serving receipts. `finalize` turns a request's draft
 * into a signed receipt and the KV writes that persist it (handed to the
 * group committer with the request's other writes); `get` applies the access
 * rule: a receipt is only served to the key that made the request.
 */
import { type Receipt, signReceiptJcs } from "../aci/mod.ts";
import { GatewayError } from "../http/mod.ts";
import type { KvWrite } from "../store/mod.ts";
import type { ReceiptDraft } from "./recorder.ts";
import type { Identity } from "../attestation/mod.ts";
import { createRefusalStore, type RefusalPolicy } from "./refusals.ts";
import { decodeReceiptRow, encodeReceiptRow } from "./stored_row.ts";

export const RECEIPT_PREFIX = "receipts";
export const CHAT_INDEX_PREFIX = "receipt_by_chat";

export interface StoredReceipt {
  receipt: Receipt;
  owner: string | null;
  /** Epoch ms; KV expiry is best-effort, so reads check this too. */
  until: number;
}

/**
 * A stored receipt entry's value. Written as the packed row of stored_row.ts
 * (a `Uint8Array` small enough to stay out of SQLite's overflow pages).
 * Entries written before it still read: JSON text, and objects (older stores).
 */
export function parseStoredReceipt(value: unknown): StoredReceipt | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Uint8Array) {
    const row = decodeReceiptRow(value);
    return { receipt: JSON.parse(row.jcs), owner: row.owner, until: row.until };
  }
  const v: unknown = typeof value === "string" ? JSON.parse(value) : value;
  if (typeof v !== "object" || v === null || !("receipt" in v) || !("until" in v)) {
    throw new Error("corrupt stored receipt");
  }
  return v as StoredReceipt;
}

export interface ReceiptService {
  finalize(draft: ReceiptDraft): KvWrite[];
  /**
   * A refusal's receipt (nothing forwarded): its own, kept the refusal
   * retention, or past the key's budget the window's shared one (refusals.ts).
   */
  finalizeRefusal(draft: ReceiptDraft): { receiptId: string; writes: KvWrite[] };
  /** Writes pending refusal counts. */
  close(): Promise<void>;
  /** Look up by receipt id or response id; `ownerDigest` null = no credential presented. */
  get(id: string, ownerDigest: string | null): Promise<Receipt>;
}

// Long as one closure over shared state; each inner function is short.
export function createReceiptService(
  kv: Deno.Kv,
  opts: {
    identity: Identity;
    now: () => number;
    retentionDays: number;
    /** Without it, refusals are stored like any receipt. */
    refusals?: RefusalPolicy & { write: (ops: KvWrite[]) => Promise<void> };
    onError?: (e: unknown) => void;
    /** The transparency log: every stored receipt's digest is queued in the receipt's own commit. */
    log?: { pendingReceipt(receiptJcs: string, second: number): KvWrite };
  },
): ReceiptService {
  const defaultExpireIn = opts.retentionDays * 86_400_000;
  const get = async (id: string, ownerDigest: string | null): Promise<Receipt> => {
    // No receipt has such an id: answered as an unknown one (401 before 404, as everywhere).
    if (!/^[\x21-\x7e]{1,256}$/.test(id)) throw ownerDigest === null ? unauthorized() : notFound();
    let entry = await kv.get([RECEIPT_PREFIX, id]);
    if (entry.value === null) {
      const idx = await kv.get<string>(chatIndexKey(id, ownerDigest));
      if (idx.value !== null) entry = await kv.get([RECEIPT_PREFIX, idx.value]);
    }
    const found = parseStoredReceipt(entry.value);
    const stored = found !== null && found.until > opts.now() ? found : null;
    if (stored === null) {
      if (ownerDigest === null) throw unauthorized();
      throw notFound();
    }
    if (stored.owner !== null) {
      if (ownerDigest === null) throw unauthorized();
      if (stored.owner !== ownerDigest) throw notFound();
    }
    return stored.receipt;
  };
  const persist = (draft: ReceiptDraft, expireIn: number): KvWrite[] => {
    const { keys, digest } = opts.identity.current();
    const servedAt = Math.floor(opts.now() / 1000);
    const signed = signReceiptJcs({
      api_version: "aci/1",
      receipt_id: draft.receiptId,
      chat_id: draft.chatId,
      model: draft.model,
      workload_keyset_digest: digest,
      endpoint: draft.endpoint,
      method: draft.method,
      served_at: servedAt,
      // Events are hashes and metadata only (see ReceiptRecorder).
      event_log: draft.events,
    }, keys);
    // The receipt as its JCS text (already made for the signature): no second
    // serialization of the receipt, and `get` serves the very bytes signed.
    const value = encodeReceiptRow({
      jcs: signed.jcs,
      owner: draft.ownerDigest,
      until: opts.now() + expireIn,
    });
    const writes: KvWrite[] = [{
      op: "set",
      key: [RECEIPT_PREFIX, draft.receiptId],
      value,
      expireIn,
    }];
    // With its served_at: the receipt's leaf index is found from the receipt alone.
    if (opts.log) writes.push(opts.log.pendingReceipt(signed.jcs, servedAt));
    if (draft.chatId !== null) {
      writes.push({
        op: "set",
        key: chatIndexKey(draft.chatId, draft.ownerDigest),
        value: draft.receiptId,
        expireIn,
      });
    }
    return writes;
  };
  const refusals = opts.refusals
    ? createRefusalStore({
      policy: opts.refusals,
      now: opts.now,
      persist,
      write: opts.refusals.write,
      onError: opts.onError,
    })
    : null;
  return {
    finalize: (draft) => persist(draft, defaultExpireIn),
    finalizeRefusal(draft) {
      if (refusals === null) {
        return { receiptId: draft.receiptId, writes: persist(draft, defaultExpireIn) };
      }
      return refusals.record(draft);
    },
    close: () => refusals?.close() ?? Promise.resolve(),
    get,
  };
}

/**
 * Response ids are chosen by upstreams and can repeat (a restarted upstream
 * counting from 1 again, deterministic ids); indexing them per owning key
 * keeps one key's response from shadowing another key's receipt.
 */
function chatIndexKey(chatId: string, ownerDigest: string | null): Deno.KvKey {
  return [CHAT_INDEX_PREFIX, chatId, ownerDigest ?? ""];
}

function notFound(): GatewayError {
  return new GatewayError("not_found", "no receipt with this id");
}

function unauthorized(): GatewayError {
  return new GatewayError(
    "unauthorized",
    "an API key is required to read receipts (Authorization: Bearer <key>)",
  );
}
