/**
 * ACI receipts: the signed record binding a request's and response's body
 * hashes to the attested keyset. `signature = hex(Ed25519(JCS(receipt
 * without "signature")))` under the keyset's Ed25519 key named by `key_id`.
 */

import { PREFIXED_DIGEST_RE } from "./digest.ts";
import { bytesToHex } from "./hex.ts";
import { jcs } from "./jcs.ts";
import { receiptJcs, receiptJcsHalves } from "./receipt_jcs.ts";
import type { WorkloadKeys } from "./signer.ts";

const encoder = new TextEncoder();

/** Events that carry the hash of a body exactly as observed at one point. */
export type BodyHashEventType =
  | "request.received"
  | "middleware.forwarded"
  | "request.forwarded"
  | "response.received"
  | "response.returned";

/** A body-hash event; `body_hash` is `sha256:<hex>`. */
export interface BodyHashEvent {
  type: BodyHashEventType;
  body_hash: string;
}

/**
 * The first event of a request refused before its body was read (e.g. 413):
 * there is no body hash to bind, and the log says so instead of inventing one.
 */
export interface UnreadBodyEvent {
  type: "request.received";
  body_hash: null;
  body_read: false;
}

function isUnreadBody(e: ReceiptEvent): boolean {
  return e.type === "request.received" && "body_read" in e && e.body_read === false &&
    e.body_hash === null;
}

/**
 * `route.selected`: the route one attempt is made on (`attempt` counts from 1);
 * `route.served` (implementation event): the attempt whose answer the client got.
 */
export interface RouteSelectedEvent {
  type: "route.selected" | "route.served";
  target_route_id: string;
  attempt?: number;
  /** `route.served`: the provider that answered, and the canonical model an alias resolved to. */
  provider?: string;
  model_id?: string;
}

/** Present when the forwarded / returned bytes differ from the received ones. */
export interface TransparencyEvent {
  type: "transparency.request_modified" | "transparency.response_modified";
  /** Short non-confidential reason code, e.g. "provider_block_stripped". */
  reason?: string;
}

/** The upstream was verified inside the TEE before the prompt was sent. */
export interface UpstreamVerifiedEvent {
  type: "upstream.verified";
  result: "verified";
  required: boolean;
  model_id: string;
  /** 64-hex id of the attested session the request was bound to. */
  session_id: string;
  /** What the session proves about the TEE: only `hardware_proven` (or, in development, `development_switch`) satisfies `aci_verified`. */
  tee_attested?: "hardware_proven" | "development_switch" | "not_hardware_proven";
  /** The attempt (its `route.selected`) this verification belongs to. */
  attempt?: number;
}

/** Upstream verification was attempted and failed. */
export interface UpstreamVerificationFailedEvent {
  type: "upstream.verified";
  result: "failed";
  required: boolean;
  model_id: string;
  reason: string;
  upstream_name: string;
  attempt?: number;
}

/**
 * Implementation event: the request was refused before any prompt left the
 * gateway (e.g. a routing constraint could not be met). `reason` is an error
 * code, never request content. Verifiers ignore event types they do not know.
 */
export interface RequestRefusedEvent {
  type: "request.refused";
  reason: string;
}

/**
 * Any other event the gateway records (`request.forwarded`, `response.returned`,
 * refusal counts, …): hashes and metadata only, never content. Verifiers
 * ignore types they do not know.
 */
export interface OtherReceiptEvent {
  type: string;
  [field: string]: string | number | boolean | null | string[] | undefined;
}

/** One entry of a receipt's ordered `event_log`: the one event type, written by the recorder. */
export type ReceiptEvent =
  | BodyHashEvent
  | UnreadBodyEvent
  | RouteSelectedEvent
  | TransparencyEvent
  | UpstreamVerifiedEvent
  | UpstreamVerificationFailedEvent
  | RequestRefusedEvent
  | OtherReceiptEvent;

/** The receipt served at `GET /v1/aci/receipts/{id}`. */
export interface Receipt {
  api_version: "aci/1";
  receipt_id: string;
  chat_id: string | null;
  model: string | null;
  workload_keyset_digest: string;
  endpoint: string;
  method: string;
  /** Unix seconds. */
  served_at: number;
  event_log: ReceiptEvent[];
  key_id: string;
  /** Lowercase hex of the 64-byte Ed25519 signature. */
  signature: string;
}

/** A receipt before signing; `key_id` is filled from the keys when absent. */
export type UnsignedReceipt = Omit<Receipt, "signature" | "key_id"> & { key_id?: string };

const RECEIPT_ID_RE = /^rcpt-[0-9a-f]{32}$/;

/**
 * A fresh unguessable receipt id: `rcpt-` + 32 lowercase hex, the first 12 the
 * millisecond clock and the last 20 random (80 bits). The time prefix keeps
 * new receipt rows at the end of the store's B-tree: SQLite then dirties one
 * leaf page per commit instead of one per receipt, which about halves the KV
 * worker's CPU per row.
 */
export function newReceiptId(randomBytes: (n: number) => Uint8Array, nowMs: number): string {
  const bytes = randomBytes(10);
  if (bytes.length !== 10) throw new Error("randomBytes returned the wrong length");
  if (!Number.isSafeInteger(nowMs) || nowMs < 0 || nowMs >= 2 ** 48) {
    throw new RangeError("receipt id clock out of range");
  }
  return "rcpt-" + nowMs.toString(16).padStart(12, "0") + bytesToHex(bytes);
}

/** Whether `value` has the form of an id made by {@link newReceiptId}. */
export function isReceiptId(value: string): boolean {
  return RECEIPT_ID_RE.test(value);
}

/** The bytes a receipt signature covers: JCS of the receipt without `signature`. */
export function receiptSigningInput(receipt: Omit<Receipt, "signature">): Uint8Array {
  return encoder.encode(receiptJcs(receipt));
}

function assertWellFormed(r: Omit<Receipt, "signature">): void {
  if (!PREFIXED_DIGEST_RE.test(r.workload_keyset_digest)) {
    throw new Error("receipt workload_keyset_digest is malformed");
  }
  if (!Number.isSafeInteger(r.served_at)) {
    throw new Error("receipt served_at must be integer seconds");
  }
  if (r.event_log.length === 0 || r.event_log[0].type !== "request.received") {
    throw new Error("receipt event_log must start with request.received");
  }
  for (const e of r.event_log) {
    if (isUnreadBody(e) && e === r.event_log[0]) continue;
    if ("body_hash" in e && !PREFIXED_DIGEST_RE.test(String(e.body_hash))) {
      throw new Error(`receipt event ${e.type} has a malformed body_hash`);
    }
  }
}

/**
 * Signs a receipt with the workload's Ed25519 key. Throws when the receipt
 * names another key, or breaks an invariant verifiers rely on (first event
 * `request.received`, well-formed digests, integer `served_at`).
 */
export function signReceipt(unsigned: UnsignedReceipt, keys: WorkloadKeys): Receipt {
  return signReceiptJcs(unsigned, keys).receipt;
}

/**
 * {@link signReceipt}, also giving the signed receipt's JCS text (valid JSON
 * of the same document), so storing it needs no second serialization.
 */
export function signReceiptJcs(
  unsigned: UnsignedReceipt,
  keys: WorkloadKeys,
): { receipt: Receipt; jcs: string } {
  if (unsigned.key_id !== undefined && unsigned.key_id !== keys.ed25519KeyId) {
    throw new Error("receipt key_id does not name the workload's ed25519 key");
  }
  const body: Omit<Receipt, "signature"> = { ...unsigned, key_id: keys.ed25519KeyId };
  assertWellFormed(body);
  const halves = receiptJcsHalves(body);
  if (halves === null) {
    // Not the plain known shape: the generic form, serialized twice.
    const signature = bytesToHex(keys.signEd25519(receiptSigningInput(body)));
    const receipt = { ...body, signature };
    return { receipt, jcs: jcs(receipt) };
  }
  const signature = bytesToHex(keys.signEd25519(encoder.encode(halves.head + halves.tail)));
  return {
    receipt: { ...body, signature },
    jcs: `${halves.head},"signature":"${signature}"${halves.tail}`,
  };
}
