/**
 * Receipt test helpers: raw HTTP exchanges that keep the exact bytes sent and
 * received, receipt and report fetching, and an independent re-implementation
 * of the receipt checks (JCS with `canonicalize`, SHA-256 and Ed25519 with
 * `node:crypto`), so the end-to-end tests do not only trust `src/verify`.
 */
import assert from "node:assert/strict";
import { createHash, createPublicKey, randomBytes, verify } from "node:crypto";
import { Buffer } from "node:buffer";
import canonicalize from "canonicalize";

export type Json = Record<string, unknown>;

/** One request/response with the exact bytes on both sides. */
export interface RawExchange {
  status: number;
  headers: Headers;
  request: Uint8Array;
  response: Uint8Array;
  receiptId: string | null;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function asRecord(v: unknown, what = "value"): Json {
  assert.ok(typeof v === "object" && v !== null && !Array.isArray(v), `${what} is not an object`);
  return v as Json;
}

export function text(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

export function sha256Prefixed(bytes: Uint8Array): string {
  return `sha256:${sha256Hex(bytes)}`;
}

/** RFC 8785 bytes of a value, independently of src/aci/jcs.ts. */
export function jcs(value: unknown): Uint8Array {
  const s = canonicalize(value);
  if (s === undefined) throw new Error("value has no JCS form");
  return encoder.encode(s);
}

/** POSTs `body` (a string is sent as is) and reads the whole answer as bytes. */
export async function postRaw(
  base: string,
  path: string,
  body: unknown,
  apiKey: string | null,
  headers: Record<string, string> = {},
): Promise<RawExchange> {
  const request = encoder.encode(typeof body === "string" ? body : JSON.stringify(body));
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(apiKey === null ? {} : { authorization: `Bearer ${apiKey}` }),
      ...headers,
    },
    body: request,
  });
  const response = new Uint8Array(await res.arrayBuffer());
  return {
    status: res.status,
    headers: res.headers,
    request,
    response,
    receiptId: res.headers.get("x-receipt-id"),
  };
}

export interface JsonAnswer {
  status: number;
  headers: Headers;
  body: unknown;
}

export async function getJson(url: string, apiKey: string | null = null): Promise<JsonAnswer> {
  const res = await fetch(url, {
    headers: apiKey === null ? {} : { authorization: `Bearer ${apiKey}` },
  });
  const raw = await res.text();
  return { status: res.status, headers: res.headers, body: raw === "" ? null : JSON.parse(raw) };
}

/** `GET /v1/aci/receipts/{id}`. */
export function fetchReceipt(base: string, id: string, apiKey: string | null): Promise<JsonAnswer> {
  return getJson(`${base}/v1/aci/receipts/${encodeURIComponent(id)}`, apiKey);
}

/** Polls the receipt until it is served (finalization after a disconnect is asynchronous). */
export async function waitForReceipt(
  base: string,
  id: string,
  apiKey: string,
  timeoutMs = 5_000,
): Promise<Json> {
  const until = Date.now() + timeoutMs;
  while (true) {
    const r = await fetchReceipt(base, id, apiKey);
    if (r.status === 200) return asRecord(r.body, "receipt");
    if (Date.now() > until) throw new Error(`receipt ${id} not served (last status ${r.status})`);
    await new Promise((res) => setTimeout(res, 25));
  }
}

/** The canonical report fetched with a fresh nonce (returned with it). */
export async function fetchReport(
  base: string,
  query = "",
): Promise<{ report: Json; nonce: string }> {
  const nonce = randomBytes(32).toString("hex");
  const r = await getJson(`${base}/v1/aci/attestation?nonce=${nonce}${query}`);
  assert.equal(r.status, 200);
  return { report: asRecord(r.body, "report"), nonce };
}

export function keysetOf(report: Json): Json {
  return asRecord(asRecord(report.attestation, "attestation").workload_keyset, "keyset");
}

export function events(receipt: Json): Json[] {
  const log = receipt.event_log;
  assert.ok(Array.isArray(log), "event_log is not an array");
  return log.map((e) => asRecord(e, "event"));
}

export function eventTypes(receipt: Json): string[] {
  return events(receipt).map((e) => String(e.type));
}

/** The only event of `type` (asserts there is exactly one). */
export function onlyEvent(receipt: Json, type: string): Json {
  const found = events(receipt).filter((e) => e.type === type);
  assert.equal(found.length, 1, `expected exactly one ${type} event, got ${found.length}`);
  return found[0];
}

const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** Ed25519 verification with node:crypto from a raw 32-byte public key in hex. */
export function ed25519Verifies(publicKeyHex: string, signatureHex: string, message: Uint8Array) {
  const key = createPublicKey({
    key: Buffer.concat([SPKI_ED25519_PREFIX, Buffer.from(publicKeyHex, "hex")]),
    format: "der",
    type: "spki",
  });
  return verify(null, message, key, Buffer.from(signatureHex, "hex"));
}

/**
 * The receipt's checks, recomputed without src/: keyset digest =
 * sha256(JCS(keyset)); the Ed25519 signature (key chosen by `key_id`) over
 * JCS of the receipt minus `signature`; the request/response body hashes.
 * Returns the names of the checks that failed (empty = all passed).
 */
export function independentFailures(
  receipt: Json,
  keyset: Json,
  bodies: { request?: Uint8Array; response?: Uint8Array } = {},
): string[] {
  const failed: string[] = [];
  if (receipt.workload_keyset_digest !== sha256Prefixed(jcs(keyset))) failed.push("keyset_digest");
  const keys = keyset.receipt_signing_keys;
  const entry = Array.isArray(keys)
    ? keys.map((k) => asRecord(k)).find((k) => k.key_id === receipt.key_id)
    : undefined;
  const { signature, ...unsigned } = receipt;
  if (
    entry === undefined || entry.algo !== "ed25519" || typeof entry.public_key !== "string" ||
    typeof signature !== "string" || !/^[0-9a-f]{128}$/.test(signature) ||
    !ed25519Verifies(entry.public_key, signature, jcs(unsigned))
  ) failed.push("signature");
  const hashOf = (type: string) => events(receipt).find((e) => e.type === type)?.body_hash;
  if (bodies.request && hashOf("request.received") !== sha256Prefixed(bodies.request)) {
    failed.push("request_body_hash");
  }
  if (bodies.response && hashOf("response.returned") !== sha256Prefixed(bodies.response)) {
    failed.push("response_body_hash");
  }
  return failed;
}

const CORE: Record<string, string> = {
  "request.received": "A",
  "middleware.forwarded": "M",
  "route.selected": "S",
  "request.forwarded": "F",
  "transparency.request_modified": "Q",
  "upstream.verified": "V",
  "response.received": "R",
  "transparency.response_modified": "T",
  "response.returned": "Z",
};

/**
 * Asserts the order of the event types (implementation events such
 * as `stream.*` or `upstream.attempt_failed` are skipped): served =
 * received, middleware, one or more attempts (route, optional upstream.verified,
 * forwarded with optional request_modified once bytes were sent), response received, optional
 * response_modified, returned. Refused = nothing forwarded, returned last.
 * Also checks each `transparency.*` event is present exactly when the hashes differ.
 */
export function assertEventOrder(receipt: Json, mode: "served" | "refused"): void {
  const evs = events(receipt);
  const seq = evs.map((e) => CORE[String(e.type)] ?? "").join("");
  // An attempt: route, its upstream.verified, and `request.forwarded` (+ request_modified)
  // only once bytes were written (#20 item 5), so an attempt that never connected has none.
  const re = mode === "served" ? /^AM(SV?(FQ?)?)*SV?FQ?RT?Z$/ : /^A(M)?(SV?)*Z$/;
  assert.match(seq, re, `event order ${eventTypes(receipt).join(", ")}`);
  const received = evs[0].body_hash;
  for (let i = 0; i < evs.length; i++) {
    if (evs[i].type !== "request.forwarded") continue;
    const modified = evs[i + 1]?.type === "transparency.request_modified";
    assert.equal(modified, evs[i].body_hash !== received, "request_modified iff bytes differ");
  }
  if (mode === "served") {
    const got = evs.find((e) => e.type === "response.received")?.body_hash;
    const ret = evs.find((e) => e.type === "response.returned")?.body_hash;
    const modified = evs.some((e) => e.type === "transparency.response_modified");
    assert.equal(modified, got !== ret, "response_modified iff bytes differ");
  }
}

/** Every SSE `data:` payload of a raw stream that parses as JSON. */
export function sseJson(raw: Uint8Array): unknown[] {
  const out: unknown[] = [];
  for (const line of text(raw).split("\n")) {
    if (!line.startsWith("data: ")) continue;
    try {
      out.push(JSON.parse(line.slice(6)));
    } catch {
      // `[DONE]`
    }
  }
  return out;
}

/** The id the client saw: `id`, `message.id` (messages stream) or `response.id` (responses stream). */
export function clientResponseId(raw: Uint8Array, streamed: boolean): string | null {
  const docs = streamed ? sseJson(raw) : [JSON.parse(text(raw))];
  for (const d of docs) {
    const r = asRecord(d);
    if (typeof r.id === "string") return r.id;
    for (const f of ["message", "response"]) {
      const inner = r[f];
      if (typeof inner === "object" && inner !== null && typeof (inner as Json).id === "string") {
        return (inner as Json).id as string;
      }
    }
  }
  return null;
}
