import assert from "node:assert/strict";
import { ed25519 } from "@noble/curves/ed25519.js";
import { sha256Hex, sha256Prefixed } from "./digest.ts";
import { hexToBytes } from "./hex.ts";
import { jcs } from "./jcs.ts";
import {
  isReceiptId,
  newReceiptId,
  receiptSigningInput,
  signReceipt,
  type UnsignedReceipt,
} from "./receipt.ts";
import { generateWorkloadKeys } from "./signer.ts";

// The public ACI receipt vector (spec/test-vectors.md §4 of the reference implementation).
const REQ = '{"messages":[{"content":"hi","role":"user"}],"model":"demo-model"}';
const RES = '{"choices":[],"id":"chatcmpl-123"}';
const SESSION = "95ad1cb4dd25445808c2e9d116caf420b05703730b506395e8fc1ca6faeae28f";
const DIGEST = "sha256:53a5cd44b30dcc51999754c719f2628a041f174ecbf9662a6f8e898a10cd9371";

function vectorReceipt(): UnsignedReceipt {
  return {
    api_version: "aci/1",
    receipt_id: "rcpt-0001",
    chat_id: "chatcmpl-123",
    model: "demo-model",
    workload_keyset_digest: DIGEST,
    endpoint: "/v1/chat/completions",
    method: "POST",
    served_at: 1750000000,
    event_log: [
      { type: "request.received", body_hash: sha256Prefixed(REQ) },
      { type: "request.forwarded", body_hash: sha256Prefixed(REQ) },
      {
        type: "upstream.verified",
        result: "verified",
        required: true,
        model_id: "demo-model",
        session_id: SESSION,
      },
      { type: "response.returned", body_hash: sha256Prefixed(RES) },
    ],
  };
}

const vectorKeys = () =>
  generateWorkloadKeys({ ed25519Seed: new Uint8Array(32).fill(2), ed25519KeyId: "receipt-1" });

Deno.test("receipt: body hashes, signing input and signature equal the ACI vector", () => {
  assert.equal(
    sha256Prefixed(REQ),
    "sha256:94d809bf47380d8a2eab0eb6e126d4dda9364b0b4725cdf7ead52dd70b2aa87b",
  );
  assert.equal(
    sha256Prefixed(RES),
    "sha256:dedfffe5b14d031b8e2c01996d021a15293cb7c63b56be7e4be9e89b6f0a5f61",
  );
  const receipt = signReceipt(vectorReceipt(), vectorKeys());
  const { signature, ...unsigned } = receipt;
  assert.equal(
    sha256Hex(receiptSigningInput(unsigned)),
    "1bd328e6880a5a12b3915af95ea32111310e04ab9e21ac3d71ce268e33b965c9",
  );
  assert.equal(
    signature,
    "d5b005e093bde3b577faf270b7184b09e169cacb0ecb206b103bd2581f997db03da616175454b063323a23ac1dc68f1ce506c2a6eba8aa0561d5e724f0b80c03",
  );
  assert.equal(receipt.key_id, "receipt-1");
});

Deno.test("receipt: signature verifies independently over JCS of the document minus signature", () => {
  const keys = generateWorkloadKeys();
  const receipt = signReceipt({
    ...vectorReceipt(),
    receipt_id: newReceiptId((n) => crypto.getRandomValues(new Uint8Array(n)), 1_700_000_000_000),
  }, keys);
  // Re-encode (pretty) and parse back, as a verifier fetching it would.
  const parsed = JSON.parse(JSON.stringify(receipt, null, 2));
  delete parsed.signature;
  const msg = new TextEncoder().encode(jcs(parsed));
  assert.ok(ed25519.verify(hexToBytes(receipt.signature), msg, keys.ed25519PublicKey));
  assert.equal(receipt.key_id, keys.ed25519KeyId);
});

Deno.test("receipt: newReceiptId is rcpt- + 12 hex of the ms clock + 20 hex of 10 random bytes", () => {
  const id = newReceiptId((n) => new Uint8Array(n).fill(0xab), 0x18b_cfe5_6800);
  assert.equal(id, "rcpt-018bcfe56800" + "ab".repeat(10));
  assert.ok(isReceiptId(id));
  assert.ok(!isReceiptId("rcpt-0001"));
  assert.throws(() => newReceiptId(() => new Uint8Array(8), 0));
  assert.throws(() => newReceiptId((n) => new Uint8Array(n), -1), RangeError);
  assert.throws(() => newReceiptId((n) => new Uint8Array(n), 1.5), RangeError);
  // Later ids sort after earlier ones, so new rows land at the end of the KV range.
  const a = newReceiptId((n) => new Uint8Array(n).fill(0xff), 1_700_000_000_000);
  const b = newReceiptId((n) => new Uint8Array(n), 1_700_000_000_001);
  assert.ok(a < b);
});

Deno.test("receipt: signReceipt refuses a foreign key_id and broken invariants", () => {
  const keys = generateWorkloadKeys();
  assert.throws(() => signReceipt({ ...vectorReceipt(), key_id: "other" }, keys), /key_id/);
  const noFirst = vectorReceipt();
  noFirst.event_log = noFirst.event_log.slice(1);
  assert.throws(() => signReceipt(noFirst, keys), /request.received/);
  assert.throws(
    () => signReceipt({ ...vectorReceipt(), served_at: 1750000000.5 }, keys),
    /served_at/,
  );
  const badHash = vectorReceipt();
  badHash.event_log[0] = { type: "request.received", body_hash: "sha256:XYZ" };
  assert.throws(() => signReceipt(badHash, keys), /body_hash/);
});
