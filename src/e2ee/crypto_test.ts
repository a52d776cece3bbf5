import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  canEncryptTo,
  decryptField,
  encryptField,
  generateKeyPair,
  normalizePublicKey,
  requestAad,
  responseAad,
  SECP256K1_ALGO,
  X25519_ALGO,
} from "./crypto.ts";
import { bytesToHex, hexToBytes } from "../aci/hex.ts";
import * as indep from "../../tests/support/e2ee_independent.ts";

// spec/e2ee-v2-test-vectors.md of Dstack-TEE/private-ai-gateway, verbatim.
const SERVICE_PUBLIC = "5dfedd3b6bd47f6fa28ee15d969d5bb0ea53774d488bdaf9df1c6e0124b3ef22";
const NONCE = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const REQUEST_AAD =
  '{"algo":"x25519-aes-256-gcm-hkdf-sha256","field":"messages.0.content","model":"demo-model","nonce":"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f","purpose":"aci.e2ee.request.v2","ts":1750000000}';
const RESPONSE_AAD =
  '{"algo":"x25519-aes-256-gcm-hkdf-sha256","field":"choices.0.message.content","id":"chatcmpl-123","model":"demo-model","nonce":"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f","purpose":"aci.e2ee.response.v2","ts":1750000000}';

const rnd = (n: number) => new Uint8Array(randomBytes(n));
const dec = new TextDecoder();
const enc = new TextEncoder();
const ctx = { algo: X25519_ALGO, model: "demo-model", nonce: NONCE, ts: 1750000000 } as const;

Deno.test("published vectors: service seed 32×0x03 gives the published X25519 key", () => {
  const { publicKey } = generateKeyPair(X25519_ALGO, new Uint8Array(32).fill(3));
  assert.equal(bytesToHex(publicKey), SERVICE_PUBLIC);
});

Deno.test("published vectors: request and response AAD bytes, byte for byte", () => {
  assert.equal(dec.decode(requestAad(ctx, "messages.0.content")), REQUEST_AAD);
  assert.equal(
    dec.decode(responseAad(ctx, "chatcmpl-123", "choices.0.message.content")),
    RESPONSE_AAD,
  );
  // The independent test implementation agrees with the vectors too.
  assert.equal(
    dec.decode(indep.aad("request", { ...ctx, field: "messages.0.content" })),
    REQUEST_AAD,
  );
  assert.equal(
    dec.decode(
      indep.aad("response", { ...ctx, id: "chatcmpl-123", field: "choices.0.message.content" }),
    ),
    RESPONSE_AAD,
  );
});

for (const algo of [X25519_ALGO, SECP256K1_ALGO] as const) {
  Deno.test(`${algo}: module ciphertext opens independently, and the reverse`, async () => {
    const service = generateKeyPair(algo);
    const ad = requestAad({ ...ctx, algo }, "messages.0.content");
    const value = encryptField(algo, bytesToHex(service.publicKey), enc.encode("héllo"), ad, rnd);
    assert.match(value, /^[0-9a-f]+$/);
    assert.equal(value.length, 2 * ((algo === X25519_ALGO ? 32 : 65) + 12 + 6 + 16));
    assert.equal(await indep.decrypt(algo, service.secretKey, value, ad), "héllo");
    const back = await indep.encrypt(algo, bytesToHex(service.publicKey), "wörld", ad);
    assert.equal(dec.decode(decryptField(algo, service.secretKey, back, ad)!), "wörld");
    // Fresh ephemeral key and nonce per field.
    const again = encryptField(algo, bytesToHex(service.publicKey), enc.encode("héllo"), ad, rnd);
    assert.notEqual(again.slice(0, 64), value.slice(0, 64));
  });

  Deno.test(`${algo}: tampering, another field path or another key fail closed`, () => {
    const service = generateKeyPair(algo);
    const ad = requestAad({ ...ctx, algo }, "messages.0.content");
    const value = encryptField(algo, bytesToHex(service.publicKey), enc.encode("secret"), ad, rnd);
    const flipped = value.slice(0, -2) + (value.endsWith("00") ? "01" : "00");
    assert.equal(decryptField(algo, service.secretKey, flipped, ad), null);
    const moved = requestAad({ ...ctx, algo }, "messages.1.content");
    assert.equal(decryptField(algo, service.secretKey, value, moved), null);
    assert.equal(decryptField(algo, generateKeyPair(algo).secretKey, value, ad), null);
    assert.equal(decryptField(algo, service.secretKey, value.slice(0, 40), ad), null);
    assert.equal(decryptField(algo, service.secretKey, "zz" + value, ad), null);
  });
}

Deno.test("public key normalization: 0x, case, secp256k1 64-byte form; invalid keys", () => {
  const { publicKey } = generateKeyPair(SECP256K1_ALGO);
  const h = bytesToHex(publicKey);
  assert.equal(normalizePublicKey(SECP256K1_ALGO, "0x" + h.toUpperCase()), h);
  assert.equal(normalizePublicKey(SECP256K1_ALGO, h.slice(2)), h);
  assert.equal(normalizePublicKey(SECP256K1_ALGO, "04" + "11".repeat(64)), null); // off curve
  assert.equal(normalizePublicKey(SECP256K1_ALGO, h.slice(4)), null);
  assert.equal(
    normalizePublicKey(X25519_ALGO, "0x" + SERVICE_PUBLIC.toUpperCase()),
    SERVICE_PUBLIC,
  );
  assert.equal(normalizePublicKey(X25519_ALGO, SERVICE_PUBLIC + "00"), null);
  assert.equal(normalizePublicKey(X25519_ALGO, "xyz"), null);
  assert.deepEqual(hexToBytes(normalizePublicKey(X25519_ALGO, SERVICE_PUBLIC)!).length, 32);
});

Deno.test("canEncryptTo refuses exactly the low-order X25519 points (incl. non-canonical forms)", () => {
  const le = (n: bigint) => {
    const b = new Uint8Array(32);
    for (let i = 0; i < 32; i++) b[i] = Number((n >> BigInt(8 * i)) & 0xffn);
    return bytesToHex(b);
  };
  const p = 2n ** 255n - 19n;
  const low = [
    0n,
    1n,
    p - 1n,
    p,
    p + 1n,
    325606250916557431795983626356110631294008115727848805560023387167927233504n,
    39382357235489614581723060781553021112529911719440698176882885853963445705823n,
  ];
  for (const u of low) {
    assert.equal(canEncryptTo(X25519_ALGO, le(u)), false, `u = ${u}`);
    // The curve library agrees: an ECDH with it is refused.
    assert.throws(() => encryptField(X25519_ALGO, le(u), enc.encode("x"), enc.encode(""), rnd));
  }
  // The top bit is ignored (RFC 7748), so it cannot smuggle a low-order point past the check.
  assert.equal(canEncryptTo(X25519_ALGO, le(1n | (1n << 255n))), false);
  assert.equal(canEncryptTo(X25519_ALGO, SERVICE_PUBLIC), true);
  assert.equal(canEncryptTo(X25519_ALGO, le(9n)), true);
  const { publicKey } = generateKeyPair(SECP256K1_ALGO);
  assert.equal(canEncryptTo(SECP256K1_ALGO, bytesToHex(publicKey)), true);
});
