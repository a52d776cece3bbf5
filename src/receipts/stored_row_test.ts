import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { newReceiptId, signReceiptJcs, type UnsignedReceipt } from "../aci/receipt.ts";
import { jcs } from "../aci/jcs.ts";
import { generateWorkloadKeys } from "../aci/signer.ts";
import { createIdentity } from "../attestation/identity.ts";
import { GroupCommitter } from "../store/group_commit.ts";
import { createReceiptService } from "./service.ts";
import { decodeReceiptRow, encodeReceiptRow, type ReceiptRow } from "./stored_row.ts";

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

const keys = generateWorkloadKeys();
const DIGEST = "sha256:" + "0123456789abcdef".repeat(4);
const hex = (r: () => number, n: number) =>
  Array.from({ length: n }, () => "0123456789abcdef"[Math.floor(r() * 16)]).join("");

// Pieces that exercise the packing: hex runs around the thresholds (odd,
// even, upper case, over 510), phrase fragments and whole phrases, escapes,
// controls JCS escapes, non-ASCII and astral characters.
const PIECES = [
  "a",
  "f",
  "g",
  "0",
  '"',
  "\\",
  "\n",
  "\u0001",
  "\u001f",
  "é",
  "€",
  "😀",
  "\u2028",
  ",",
  "{",
  "]",
  '","type":"',
  '","type":"request.received"}',
  '{"body_hash":"sha256:',
  '","served_at":',
  "ABCDEF0123456789ABCDEF0123456789",
];

function randomText(r: () => number): string {
  let s = "";
  const n = Math.floor(r() * 12);
  for (let i = 0; i < n; i++) {
    const k = r();
    if (k < 0.2) s += hex(r, [1, 31, 32, 33, 64, 128, 509, 510, 511, 700][Math.floor(r() * 10)]);
    else s += PIECES[Math.floor(r() * PIECES.length)];
  }
  return s;
}

const EVENT_TYPES = [
  "request.received",
  "middleware.forwarded",
  "request.forwarded",
  "response.received",
  "response.returned",
  "route.selected",
  "route.served",
  "upstream.verified",
  "upstream.attempt_failed",
  "request.refused",
  "transparency.request_modified",
  "refusals.shared",
];

function randomReceipt(r: () => number): UnsignedReceipt {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const events: UnsignedReceipt["event_log"] = [
    { type: "request.received", body_hash: "sha256:" + hex(r, 64) },
  ];
  for (let i = Math.floor(r() * 10); i > 0; i--) {
    const type = pick(EVENT_TYPES);
    const e: Record<string, string | number | boolean | null> = { type };
    if (r() < 0.5) e.body_hash = "sha256:" + hex(r, 64);
    if (r() < 0.3) e.attempt = Math.floor(r() * 3) + 1;
    if (r() < 0.3) e.target_route_id = randomText(r);
    if (r() < 0.2) e.session_id = hex(r, 64);
    if (r() < 0.2) e.required = r() < 0.5;
    if (r() < 0.2) e.result = pick(["verified", "failed"]);
    if (r() < 0.2) e.tee_attested = "hardware_proven";
    if (r() < 0.2) e.reason = randomText(r);
    if (r() < 0.1) e[randomText(r) || "x"] = randomText(r);
    events.push(e as UnsignedReceipt["event_log"][number]);
  }
  return {
    api_version: "aci/1",
    receipt_id: r() < 0.8
      ? newReceiptId((n) => new Uint8Array(n).fill(7), 1_700_000_000_000)
      : randomText(r),
    chat_id: r() < 0.2 ? null : randomText(r),
    model: r() < 0.2 ? null : randomText(r),
    workload_keyset_digest: DIGEST,
    endpoint: pick(["/v1/chat/completions", "/v1/messages", "/v1/responses", randomText(r)]),
    method: pick(["POST", "GET", randomText(r)]),
    served_at: Math.floor(r() * 2e9),
    event_log: events,
  };
}

function roundTrip(row: ReceiptRow): Uint8Array {
  const bytes = encodeReceiptRow(row);
  assert.deepEqual(decodeReceiptRow(bytes), row);
  // The row is its own copy: a later encoding must not change it.
  const again = new Uint8Array(bytes);
  encodeReceiptRow({ jcs: "x".repeat(5000), owner: null, until: 0 });
  assert.deepEqual(bytes, again);
  return bytes;
}

Deno.test("stored row: signed receipts' JCS round-trips byte for byte (3,000 generated)", () => {
  for (let seed = 1; seed <= 3000; seed++) {
    const r = rng(seed);
    const { jcs: text, receipt } = signReceiptJcs(randomReceipt(r), keys);
    assert.equal(text, jcs(receipt), `seed ${seed}`);
    const owner = r() < 0.3 ? null : r() < 0.7 ? hex(r, 64) : randomText(r);
    const row = { jcs: text, owner, until: Math.floor(r() * 2e12) + (r() < 0.1 ? 0.5 : 0) };
    try {
      roundTrip(row);
    } catch (e) {
      throw new Error(`seed ${seed}: ${e}`);
    }
  }
});

Deno.test("stored row: any well-formed text round-trips, raw control characters included", () => {
  for (let seed = 1; seed <= 3000; seed++) {
    const r = rng(seed * 7919);
    roundTrip({ jcs: randomText(r), owner: randomText(r), until: r() * 1e13 });
  }
  for (const text of ["", "\u0000", "a\u0001b" + "ab".repeat(40), "é" + "0".repeat(64), "😀"]) {
    roundTrip({ jcs: text, owner: null, until: 0 });
  }
  // Raw control characters cannot be packed (they are the tags): the text is stored as is.
  assert.equal(encodeReceiptRow({ jcs: "\u0001" + "ab".repeat(40), owner: null, until: 0 })[0], 0);
  // A lone surrogate has no exact UTF-8 form: refused, not stored altered.
  assert.throws(() => encodeReceiptRow({ jcs: "a\ud800b", owner: null, until: 0 }), /well-formed/);
});

Deno.test("stored row: the usual receipt shrinks to about a third, hashes and owner as bytes", () => {
  const hash = (c: string) => "sha256:" + c.repeat(64);
  const { jcs: text } = signReceiptJcs({
    api_version: "aci/1",
    receipt_id: "rcpt-" + "0".repeat(32),
    chat_id: "chatcmpl-1",
    model: "bench/chat",
    workload_keyset_digest: DIGEST,
    endpoint: "/v1/chat/completions",
    method: "POST",
    served_at: 1_795_000_000,
    event_log: [
      { type: "request.received", body_hash: hash("1") },
      { type: "middleware.forwarded", body_hash: hash("1") },
      { type: "route.selected", target_route_id: "mock:chat", attempt: 1 },
      { type: "request.forwarded", body_hash: hash("2") },
      { type: "transparency.request_modified" },
      { type: "route.served", target_route_id: "mock:chat", attempt: 1 },
      { type: "response.received", body_hash: hash("3") },
      { type: "response.returned", body_hash: hash("3") },
    ],
  }, keys);
  const owner = "d".repeat(64);
  const bytes = roundTrip({ jcs: text, owner, until: 1_797_000_000_000 });
  // The JSON row it replaces: 1,346 bytes for this shape (bench/RESULTS.md).
  const json = JSON.stringify({ receipt: JSON.parse(text), owner, until: 1_797_000_000_000 });
  assert.ok(json.length > 1300, `${json.length}`);
  assert.ok(bytes.length < json.length / 3 + 10, `${bytes.length} bytes`);
  assert.equal(bytes[9], 1, "the owner digest is stored as 32 bytes");
});

Deno.test("stored row: format 1 is fixed (rows already stored must keep reading)", () => {
  // Bytes written by this format's first version: a change to the phrase list
  // or layout breaks this test, and would break every stored receipt.
  const text = '{"api_version":"aci/1","chat_id":null,"endpoint":"/v1/messages","event_log":[' +
    '{"body_hash":"sha256:' + "ab".repeat(32) + '","type":"request.received"},' +
    '{"attempt":2,"target_route_id":"p:m","type":"route.selected"},' +
    '{"type":"transparency.response_modified"},{"reason":"x","type":"request.refused"},' +
    '{"attempt":1,"model_id":"m","required":true,"result":"verified","session_id":"' +
    "cd".repeat(32) + '","tee_attested":"hardware_proven","type":"upstream.verified"}],' +
    '"key_id":"ed25519:0011223344556677","method":"POST","model":"m","receipt_id":"rcpt-' +
    "ef".repeat(16) + '","served_at":1,"signature":"' + "12".repeat(64) +
    '","workload_keyset_digest":"sha256:' + "34".repeat(32) + '"}';
  const ascii = (t: string) => Array.from(t, (c) => c.charCodeAt(0).toString(16)).join("");
  const run = (byte: string, n: number) => "01" + n.toString(16).padStart(2, "0") + byte.repeat(n);
  const golden = "01" + "429977420dc00000" + "00" + // format 1, until 7e12, no owner
    "02" + ascii("null") + "04" + ascii("messages") + "05" + "06" + run("ab", 32) + "07" +
    ascii(",") + "0c" + ascii("2") + "0d" + ascii("p:m") + "0e" + ascii(",") + "12" +
    ascii(",") + "13" + ascii("x") + "18" + ascii(",") + "0c" + ascii("1") + "14" + ascii('m"') +
    "15" + run("cd", 32) + "17" + "19" + ascii('0011223344556677"') + "1a" + ascii('"m"') +
    "1b" + run("ef", 16) + "1c" + ascii("1") + "1d" + run("12", 64) + "1e" + run("34", 32) +
    ascii('"}');
  const bytes = encodeReceiptRow({ jcs: text, owner: null, until: 7e12 });
  const got = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  assert.equal(got, golden);
  assert.equal(decodeReceiptRow(bytes).jcs, text);
});

Deno.test("stored row: malformed rows are errors, never a different receipt", () => {
  const good = encodeReceiptRow({ jcs: '{"a":"' + "ab".repeat(20) + '"}', owner: "o", until: 1 });
  for (
    const bad of [
      new Uint8Array(0),
      good.subarray(0, 9),
      Uint8Array.of(9, ...good.subarray(1)), // unknown format
      Uint8Array.of(...good.subarray(0, 9), 7, ...good.subarray(10)), // unknown owner kind
      Uint8Array.of(...good, 0x1f), // an unassigned tag
      Uint8Array.of(...good, 0x01, 40, 1, 2), // a hex run past the end
      Uint8Array.of(...good, 0xff), // not UTF-8
    ]
  ) {
    assert.throws(() => decodeReceiptRow(bad), /corrupt stored receipt/);
  }
});

Deno.test("stored row: a receipt row fits SQLite's page (no overflow pages in Deno KV's table)", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/rows.kv`;
  try {
    const kv = await Deno.openKv(path);
    const now = Date.parse("2026-06-01T00:00:00Z");
    const identity = createIdentity({ subject: null, ttlSeconds: 86_400, now: () => now });
    const service = createReceiptService(kv, { identity, now: () => now, retentionDays: 30 });
    const committer = new GroupCommitter(kv);
    const h = (i: number) => "sha256:" + (i % 16).toString(16).repeat(64);
    const ids: string[] = [];
    for (let i = 0; i < 64; i++) {
      const id = newReceiptId((n) => crypto.getRandomValues(new Uint8Array(n)), now + i);
      ids.push(id);
      await committer.write(service.finalize({
        receiptId: id,
        endpoint: "/v1/chat/completions",
        method: "POST",
        model: "provider/some-model-name",
        chatId: `chatcmpl-${crypto.randomUUID()}`,
        ownerDigest: hex(rng(i), 64),
        events: [
          { type: "request.received", body_hash: h(i) },
          { type: "middleware.forwarded", body_hash: h(i) },
          { type: "route.selected", target_route_id: "provider:some-model-name", attempt: 1 },
          { type: "request.forwarded", body_hash: h(i + 1) },
          { type: "transparency.request_modified" },
          { type: "route.served", target_route_id: "provider:some-model-name", attempt: 1 },
          { type: "response.received", body_hash: h(i + 2) },
          { type: "response.returned", body_hash: h(i + 2) },
        ],
      }));
    }
    const got = await service.get(ids[5], hex(rng(5), 64));
    assert.equal(got.receipt_id, ids[5]);
    kv.close();
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      const pages = db.prepare(
        "select sum(pagetype = 'overflow') as overflow, max(mx_payload) as mx from dbstat where name = 'kv'",
      ).get() as { overflow: number; mx: number };
      assert.equal(pages.overflow, 0);
      // SQLite keeps at most 1,002 bytes of a cell on a 4 KiB page of this table.
      assert.ok(pages.mx < 1002 - 300, `largest payload ${pages.mx}`);
    } finally {
      db.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
