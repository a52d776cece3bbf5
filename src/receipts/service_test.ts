import assert from "node:assert/strict";
import { receiptSigningInput } from "../aci/receipt.ts";
import { ed25519Verify } from "../aci/ed25519.ts";
import { hexToBytes } from "../aci/hex.ts";
import { createIdentity } from "../attestation/identity.ts";
import type { KvWrite } from "../store/group_commit.ts";
import { ReceiptRecorder } from "./recorder.ts";
import {
  CHAT_INDEX_PREFIX,
  createReceiptService,
  parseStoredReceipt,
  RECEIPT_PREFIX,
} from "./service.ts";
import { rejectedGatewayError } from "../../tests/support/gateway_error.ts";

const HASH = "sha256:" + "ab".repeat(32);
const DAY = 86_400_000;

async function setup() {
  let now = Date.parse("2026-01-01T00:00:00Z");
  const clock = () => now;
  const kv = await Deno.openKv(":memory:");
  const identity = createIdentity({ subject: null, ttlSeconds: 86_400, now: clock });
  const service = createReceiptService(kv, { identity, now: clock, retentionDays: 2 });
  const commit = async (writes: KvWrite[]) => {
    const tx = kv.atomic();
    for (const w of writes) {
      if (w.op !== "set") throw new Error(`unexpected ${w.op}`);
      tx.set(w.key, w.value, { expireIn: w.expireIn });
    }
    assert.ok((await tx.commit()).ok);
  };
  const draft = (id: string, owner: string | null, chatId: string | null) => {
    const rec = new ReceiptRecorder(id, "/v1/chat/completions", "POST");
    rec.event({ type: "request.received", body_hash: HASH });
    rec.setModel("demo/echo");
    rec.draft.chatId = chatId;
    if (owner) rec.setOwner(owner);
    return rec.draft;
  };
  return { kv, identity, service, commit, draft, advance: (ms: number) => (now += ms) };
}

Deno.test("receipt service: finalize signs with the current keyset and writes receipt + chat index", async () => {
  const { kv, identity, service, draft } = await setup();
  try {
    const writes = service.finalize(draft("rcpt_1", "owner-a", "chatcmpl-1"));
    assert.equal(writes.length, 2);
    const [main, index] = writes;
    assert.deepEqual(main.key, [RECEIPT_PREFIX, "rcpt_1"]);
    assert.deepEqual(index.key, [CHAT_INDEX_PREFIX, "chatcmpl-1", "owner-a"]);
    assert.equal(main.op === "set" && main.expireIn, 2 * DAY);
    assert.equal(index.op === "set" && index.value, "rcpt_1");
    // Stored as the packed row (stored_row.ts); the receipt inside is signed.
    assert.ok(main.op === "set" && main.value instanceof Uint8Array);
    const stored = parseStoredReceipt(main.op === "set" ? main.value : null)!;
    assert.equal(stored.owner, "owner-a");
    assert.equal(stored.until, Date.parse("2026-01-01T00:00:00Z") + 2 * DAY);
    const r = stored.receipt;
    const snap = identity.current();
    assert.equal(r.workload_keyset_digest, snap.digest);
    assert.equal(r.key_id, snap.keys.ed25519KeyId);
    assert.equal(r.served_at, Date.parse("2026-01-01T00:00:00Z") / 1000);
    assert.equal(r.model, "demo/echo");
    assert.equal(r.chat_id, "chatcmpl-1");
    const { signature, ...unsigned } = r;
    assert.ok(
      ed25519Verify(
        hexToBytes(snap.keys.ed25519PublicKeyHex),
        hexToBytes(signature),
        receiptSigningInput(unsigned),
      ),
    );
    // No chat id: no index entry.
    assert.equal(service.finalize(draft("rcpt_2", null, null)).length, 1);
    // A draft that breaks the receipt invariants is not signed.
    const bad = draft("rcpt_3", null, null);
    bad.events.unshift({ type: "request.forwarded", body_hash: HASH });
    assert.throws(() => service.finalize(bad), /must start with request\.received/);
  } finally {
    kv.close();
  }
});

Deno.test("receipt service: get serves a receipt only to its owner, by receipt id or response id", async () => {
  const { kv, service, commit, draft } = await setup();
  try {
    await commit(service.finalize(draft("rcpt_a", "owner-a", "chatcmpl-same")));
    await commit(service.finalize(draft("rcpt_b", "owner-b", "chatcmpl-same")));
    await commit(service.finalize(draft("rcpt_anon", null, null)));

    assert.equal((await service.get("rcpt_a", "owner-a")).receipt_id, "rcpt_a");
    // The same upstream response id for two keys: each key reaches its own receipt.
    assert.equal((await service.get("chatcmpl-same", "owner-a")).receipt_id, "rcpt_a");
    assert.equal((await service.get("chatcmpl-same", "owner-b")).receipt_id, "rcpt_b");
    // Another key: 404 (never says the receipt exists); no key: 401.
    const other = await rejectedGatewayError(service.get("rcpt_a", "owner-c"));
    assert.equal(other.status, 404);
    assert.equal(other.message, "no receipt with this id");
    assert.equal((await rejectedGatewayError(service.get("rcpt_a", null))).status, 401);
    assert.equal((await rejectedGatewayError(service.get("chatcmpl-same", "owner-c"))).status, 404);
    // A receipt without an owner (e.g. an unauthenticated refusal) is readable by anyone.
    assert.equal((await service.get("rcpt_anon", null)).receipt_id, "rcpt_anon");
    assert.equal((await service.get("rcpt_anon", "owner-a")).receipt_id, "rcpt_anon");
    // Unknown ids: 404 with a key, 401 without; ids outside printable ASCII never reach KV.
    assert.equal((await rejectedGatewayError(service.get("rcpt_none", "owner-a"))).status, 404);
    assert.equal((await rejectedGatewayError(service.get("rcpt_none", null))).status, 401);
    for (const id of ["", "a b", "x".repeat(257), "é"]) {
      assert.equal((await rejectedGatewayError(service.get(id, "owner-a"))).status, 404, id);
    }
  } finally {
    kv.close();
  }
});

Deno.test("receipt service: a receipt past its retention is gone even if KV still holds it", async () => {
  const { kv, service, commit, draft, advance } = await setup();
  try {
    await commit(service.finalize(draft("rcpt_old", "owner-a", null)));
    advance(2 * DAY - 1);
    assert.equal((await service.get("rcpt_old", "owner-a")).receipt_id, "rcpt_old");
    advance(1);
    // KV's own expiry is best-effort; the stored `until` decides.
    assert.notEqual((await kv.get([RECEIPT_PREFIX, "rcpt_old"])).value, null);
    assert.equal((await rejectedGatewayError(service.get("rcpt_old", "owner-a"))).status, 404);
  } finally {
    kv.close();
  }
});

Deno.test("receipt service: rows stored by earlier versions (JSON text, objects) still serve", async () => {
  const { kv, service, draft } = await setup();
  try {
    // Each form as it was written before the packed row: the same receipt, JSON text and object.
    const [packed] = service.finalize(draft("rcpt_new", "owner-a", null));
    const stored = parseStoredReceipt(packed.op === "set" ? packed.value : null)!;
    const legacy = (id: string) => ({ ...stored, receipt: { ...stored.receipt, receipt_id: id } });
    const asText = legacy("rcpt_text");
    await kv.set([RECEIPT_PREFIX, "rcpt_text"], JSON.stringify(asText));
    await kv.set([RECEIPT_PREFIX, "rcpt_object"], legacy("rcpt_object"));
    await kv.set([RECEIPT_PREFIX, "rcpt_new"], packed.op === "set" ? packed.value : null);
    await kv.set([CHAT_INDEX_PREFIX, "chatcmpl-old", "owner-a"], "rcpt_text");
    assert.deepEqual(await service.get("rcpt_text", "owner-a"), asText.receipt);
    assert.deepEqual(await service.get("chatcmpl-old", "owner-a"), asText.receipt);
    assert.deepEqual(await service.get("rcpt_object", "owner-a"), legacy("rcpt_object").receipt);
    assert.deepEqual(await service.get("rcpt_new", "owner-a"), stored.receipt);
    // The access rule reads the owner of every form.
    for (const id of ["rcpt_text", "rcpt_object", "rcpt_new"]) {
      assert.equal((await rejectedGatewayError(service.get(id, "owner-b"))).status, 404, id);
    }
  } finally {
    kv.close();
  }
});

Deno.test("parseStoredReceipt: packed rows, JSON text and legacy objects read; anything else is corrupt", () => {
  const v = { receipt: { receipt_id: "r" }, owner: null, until: 1 };
  assert.deepEqual(parseStoredReceipt(JSON.stringify(v)), v);
  assert.deepEqual(parseStoredReceipt(v), v);
  assert.equal(parseStoredReceipt(null), null);
  assert.equal(parseStoredReceipt(undefined), null);
  assert.throws(() => parseStoredReceipt({ receipt: {} }), /corrupt stored receipt/);
  assert.throws(() => parseStoredReceipt("[]"), /corrupt stored receipt/);
  assert.throws(() => parseStoredReceipt(new Uint8Array([1, 2, 3])), /corrupt stored receipt/);
});
