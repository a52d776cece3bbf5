import assert from "node:assert/strict";
import { ed25519 } from "@noble/curves/ed25519.js";
import { sha256, sha256Hex } from "./digest.ts";
import { recoverEip191Address } from "./ethereum.ts";
import { bytesToHex, hexToBytes } from "./hex.ts";
import {
  legacyAddressBytes,
  legacyReportData,
  legacySignatureText,
  legacySigningPublicKey,
  signatureEnvelope,
} from "./legacy.ts";
import { type Receipt, signReceipt } from "./receipt.ts";
import { generateWorkloadKeys } from "./signer.ts";

const ONE = new Uint8Array(32);
ONE[31] = 1;
const noRandom = (): Uint8Array => {
  throw new Error("randomness not expected");
};

Deno.test("legacy report_data: ecdsa address padded, 64-hex nonce raw (either case)", () => {
  const keys = generateWorkloadKeys({ secp256k1SecretKey: ONE });
  const nonce = "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff";
  const { slot, nonceHex } = legacyReportData(legacyAddressBytes("ecdsa", keys), nonce, noRandom);
  assert.equal(
    bytesToHex(slot),
    "7e5f4552091a69125d5dfcb7b8c2659029395bdf" + "00".repeat(12) + nonce.toLowerCase(),
  );
  assert.equal(nonceHex, nonce.toLowerCase());
});

Deno.test("legacy report_data: other nonces are hashed, absent nonce is random", () => {
  const keys = generateWorkloadKeys();
  const addr = legacyAddressBytes("ed25519", keys);
  const hashed = legacyReportData(addr, "client-nonce-1", noRandom);
  assert.deepEqual(hashed.slot.subarray(0, 32), keys.ed25519PublicKey);
  assert.deepEqual(hashed.slot.subarray(32), sha256("client-nonce-1"));
  // 63 hex characters is not "64 hex", so it is hashed as a string.
  const short = legacyReportData(addr, "a".repeat(63), noRandom);
  assert.equal(bytesToHex(short.slot.subarray(32)), sha256Hex("a".repeat(63)));
  const random = legacyReportData(addr, null, (n) => new Uint8Array(n).fill(0x5a));
  assert.equal(random.nonceHex, "5a".repeat(32));
  assert.throws(() => legacyReportData(new Uint8Array(21), null, noRandom));
});

function sampleReceipt(keys: ReturnType<typeof generateWorkloadKeys>): Receipt {
  return signReceipt({
    api_version: "aci/1",
    receipt_id: "rcpt-" + "01".repeat(16),
    chat_id: null,
    model: null,
    workload_keyset_digest: "sha256:" + "00".repeat(32),
    endpoint: "/v1/chat/completions",
    method: "POST",
    served_at: 1,
    event_log: [{ type: "request.received", body_hash: "sha256:" + sha256Hex("req") }],
  }, keys);
}

Deno.test("legacy envelope: ecdsa text and EIP-191 signature recover to the signing address", () => {
  const keys = generateWorkloadKeys({ secp256k1SecretKey: ONE });
  const receipt = sampleReceipt(keys);
  const req = new TextEncoder().encode("req");
  const res = new TextEncoder().encode("res");
  const env = signatureEnvelope(
    receipt,
    "sha256:" + sha256Hex(req),
    sha256Hex(res),
    "ecdsa",
    keys,
  );
  assert.equal(env.text, legacySignatureText(req, res));
  assert.equal(env.text, `${sha256Hex(req)}:${sha256Hex(res)}`);
  assert.equal(env.signing_address, "0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf");
  assert.equal(env.signing_algo, "ecdsa");
  assert.match(env.signature, /^0x[0-9a-f]{130}$/);
  assert.equal(
    recoverEip191Address(env.text, hexToBytes(env.signature.slice(2))),
    env.signing_address,
  );
  assert.equal(env.receipt, receipt);
  assert.equal(legacySigningPublicKey("ecdsa", keys), keys.secp256k1PublicKeyHex);
});

Deno.test("legacy envelope: ed25519 signs the UTF-8 text; address is the public key hex", () => {
  const keys = generateWorkloadKeys();
  const env = signatureEnvelope(
    sampleReceipt(keys),
    "a".repeat(64),
    "b".repeat(64),
    "ed25519",
    keys,
  );
  assert.equal(env.signing_address, keys.ed25519PublicKeyHex);
  assert.match(env.signature, /^[0-9a-f]{128}$/);
  assert.ok(
    ed25519.verify(
      hexToBytes(env.signature),
      new TextEncoder().encode(env.text),
      keys.ed25519PublicKey,
    ),
  );
  assert.throws(() =>
    signatureEnvelope(sampleReceipt(keys), "xyz", "b".repeat(64), "ed25519", keys)
  );
});
