import assert from "node:assert/strict";
import canonicalize from "canonicalize";
import { ed25519 } from "@noble/curves/ed25519.js";
import { hexToBytes } from "./hex.ts";
import {
  receiptSigningInput,
  signReceipt,
  signReceiptJcs,
  type UnsignedReceipt,
} from "./receipt.ts";
import { receiptJcs, receiptJcsHalves } from "./receipt_jcs.ts";
import { generateWorkloadKeys } from "./signer.ts";

/** Small deterministic PRNG (mulberry32), so a failure names a reproducible seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Characters JCS treats specially: escapes, controls, non-ASCII, astral pairs, and
// member names whose UTF-16 order differs from their code point order.
const ALPHABET = [
  "a",
  "z",
  "A",
  "_",
  ".",
  "-",
  "/",
  ":",
  " ",
  "0",
  "9",
  '"',
  "\\",
  "\n",
  "\r",
  "\t",
  "\b",
  "\f",
  "\u0000",
  "\u001f",
  "\u007f",
  "é",
  "ß",
  "€",
  "\u2028",
  "\u2029",
  "😀",
  "\ud800\udc00",
  "\uffff",
  "\ufb33",
  "中",
];

function randomString(r: () => number, max = 12): string {
  let s = "";
  const n = Math.floor(r() * max);
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(r() * ALPHABET.length)];
  return s;
}

function pick<T>(r: () => number, xs: T[]): T {
  return xs[Math.floor(r() * xs.length)];
}

const hex64 = (r: () => number) =>
  Array.from({ length: 64 }, () => "0123456789abcdef"[Math.floor(r() * 16)]).join("");

function randomNumber(r: () => number): number {
  return pick(r, [
    0,
    -0,
    1,
    -1,
    Math.floor(r() * 2 ** 53),
    r(),
    1e21,
    1e-7,
    123.456,
    -4.5e-300,
    Number.MAX_SAFE_INTEGER,
  ]);
}

function randomEvent(r: () => number): Record<string, unknown> {
  const kind = Math.floor(r() * 9);
  const hash = `sha256:${hex64(r)}`;
  switch (kind) {
    case 0:
      return { type: "request.forwarded", body_hash: hash };
    case 1:
      return {
        type: "route.selected",
        target_route_id: randomString(r),
        attempt: 1 + (r() * 3 | 0),
      };
    case 2:
      return {
        type: "upstream.verified",
        result: "verified",
        required: r() < 0.5,
        model_id: randomString(r),
        session_id: hex64(r),
        tee_attested: "hardware_proven",
      };
    case 3:
      return { type: "transparency.request_modified", reason: r() < 0.5 ? undefined : "x" };
    case 4:
      return { type: "request.refused", reason: randomString(r) };
    case 5: {
      // Arbitrary members with primitive values, in arbitrary insertion order.
      const e: Record<string, unknown> = { type: randomString(r) };
      const n = Math.floor(r() * 5);
      for (let i = 0; i < n; i++) {
        e[randomString(r, 4) || "k"] = pick(r, [
          randomString(r),
          randomNumber(r),
          true,
          false,
          null,
        ]);
      }
      return e;
    }
    case 6:
      // A nested value: the generic path for this event.
      return { type: "x.nested", list: [randomString(r), 1, null], obj: { b: 1, a: [2] } };
    case 7:
      return { body_hash: hash, type: "response.returned" };
    default:
      return { type: "response.received", body_hash: hash };
  }
}

function randomReceipt(r: () => number): Record<string, unknown> {
  const events: unknown[] = [{ type: "request.received", body_hash: `sha256:${hex64(r)}` }];
  const n = Math.floor(r() * 10);
  for (let i = 0; i < n; i++) events.push(randomEvent(r));
  const receipt: Record<string, unknown> = {
    workload_keyset_digest: `sha256:${hex64(r)}`,
    api_version: "aci/1",
    receipt_id: r() < 0.9 ? `rcpt-${hex64(r).slice(0, 32)}` : randomString(r),
    chat_id: r() < 0.3 ? null : randomString(r, 40),
    model: r() < 0.2 ? null : randomString(r, 30),
    endpoint: pick(r, ["/v1/chat/completions", "/v1/messages", randomString(r)]),
    method: "POST",
    served_at: r() < 0.9 ? Math.floor(r() * 2e9) : randomNumber(r),
    event_log: events,
    key_id: `ed25519:${hex64(r).slice(0, 16)}`,
  };
  // Member insertion order must not matter.
  const keys = Object.keys(receipt).sort(() => r() - 0.5);
  return Object.fromEntries(keys.map((k) => [k, receipt[k]]));
}

Deno.test("receipt_jcs: identical to the generic canonicalize on 20,000 generated receipts", () => {
  for (let seed = 1; seed <= 20_000; seed++) {
    const receipt = randomReceipt(rng(seed));
    const expected = canonicalize(receipt);
    assert.equal(receiptJcs(receipt), expected, `seed ${seed}`);
    const h = receiptJcsHalves(receipt);
    assert.ok(h !== null, `seed ${seed}: the known shape took the fallback`);
    assert.equal(h.head + h.tail, expected, `seed ${seed}`);
  }
});

Deno.test("receipt_jcs: the signed receipt's text is its JCS, and the signature verifies over the generic form", () => {
  const keys = generateWorkloadKeys();
  for (let seed = 1; seed <= 2_000; seed++) {
    const r = rng(seed);
    const unsigned = randomReceipt(r);
    delete unsigned.key_id;
    // Well-formed where signReceipt checks: integer served_at, first event request.received.
    unsigned.served_at = Math.floor(r() * 2e9);
    const { receipt, jcs } = signReceiptJcs(unsigned as unknown as UnsignedReceipt, keys);
    assert.equal(jcs, canonicalize(receipt), `seed ${seed}`);
    assert.deepEqual(JSON.parse(jcs), JSON.parse(JSON.stringify(receipt)), `seed ${seed}`);
    const { signature, ...rest } = receipt;
    const generic = new TextEncoder().encode(canonicalize(rest));
    assert.deepEqual(receiptSigningInput(rest), generic, `seed ${seed}`);
    assert.ok(
      ed25519.verify(hexToBytes(signature), generic, keys.ed25519PublicKey),
      `seed ${seed}`,
    );
    assert.deepEqual(signReceipt(unsigned as unknown as UnsignedReceipt, keys), receipt);
  }
});

Deno.test("receipt_jcs: shapes outside the known one take the generic form, errors as the generic one", () => {
  const base = randomReceipt(rng(7));
  const extra = { ...base, extension: { z: 1, a: [true] } };
  assert.equal(receiptJcsHalves(extra), null);
  assert.equal(receiptJcs(extra), canonicalize(extra));
  const missing = { ...base };
  delete missing.model;
  assert.equal(receiptJcsHalves(missing), null);
  assert.equal(receiptJcs(missing), canonicalize(missing));
  const undefinedMember = { ...base, model: undefined };
  assert.equal(receiptJcs(undefinedMember), canonicalize(undefinedMember));
  const numericId = { ...base, chat_id: 5 };
  assert.equal(receiptJcs(numericId), canonicalize(numericId));
  const withHoles = {
    ...base,
    event_log: [base.event_log as unknown[]][0].concat([undefined, () => 1]),
  };
  assert.equal(receiptJcs(withHoles), canonicalize(withHoles));
  // What the generic form refuses, this refuses too.
  assert.throws(() => receiptJcs({ ...base, chat_id: "\ud800" }));
  assert.throws(() => canonicalize({ ...base, chat_id: "\ud800" }));
  assert.throws(() => receiptJcs({ ...base, served_at: NaN }));
  const badEvent = { ...base, event_log: [{ type: "request.received", n: Infinity }] };
  assert.throws(() => receiptJcs(badEvent));
  assert.throws(() => canonicalize(badEvent));
});
