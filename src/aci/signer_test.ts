import assert from "node:assert/strict";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { ed25519 } from "@noble/curves/ed25519.js";
import { eip191Hash, recoverEip191Address } from "./ethereum.ts";
import { bytesToHex } from "./hex.ts";
import { keysetDigest } from "./keyset.ts";
import { buildKeyset, generateWorkloadKeys } from "./signer.ts";

const ONE = new Uint8Array(32);
ONE[31] = 1;

Deno.test("signer: secret key 1 gives the well-known Ethereum address", () => {
  const keys = generateWorkloadKeys({ secp256k1SecretKey: ONE });
  assert.equal(keys.ethereumAddress, "0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf");
  assert.equal(bytesToHex(keys.ethereumAddressBytes), "7e5f4552091a69125d5dfcb7b8c2659029395bdf");
  // The generator point G, uncompressed.
  assert.equal(
    keys.secp256k1PublicKeyHex,
    "0479be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798" +
      "483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8",
  );
});

Deno.test("signer: EIP-191 signature is r||s||v and recovers to the signing address", () => {
  const keys = generateWorkloadKeys({ secp256k1SecretKey: ONE });
  const text = "a".repeat(64) + ":" + "b".repeat(64);
  const sig = keys.signEip191(text);
  assert.equal(sig.length, 65);
  assert.ok(sig[64] === 27 || sig[64] === 28);
  assert.equal(recoverEip191Address(text, sig), keys.ethereumAddress);
  // Independent check: noble verifies the compact r||s over the EIP-191 digest.
  const pub = secp256k1.getPublicKey(ONE, false);
  assert.ok(secp256k1.verify(sig.subarray(0, 64), eip191Hash(text), pub, { prehash: false }));
  assert.notEqual(recoverEip191Address(text + "x", sig), keys.ethereumAddress);
});

Deno.test("signer: Ed25519 seed 0x02*32 gives the ACI vector key; signatures verify with noble", () => {
  const keys = generateWorkloadKeys({ ed25519Seed: new Uint8Array(32).fill(2) });
  assert.equal(
    keys.ed25519PublicKeyHex,
    "8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394",
  );
  const msg = new TextEncoder().encode("hello");
  const sig = keys.signEd25519(msg);
  assert.equal(sig.length, 64);
  assert.ok(ed25519.verify(sig, msg, keys.ed25519PublicKey));
  assert.deepEqual(keys.signEd25519Text("hello"), sig, "Ed25519 is deterministic");
});

Deno.test("signer: key ids derive from the public keys", () => {
  const keys = generateWorkloadKeys();
  assert.match(keys.ed25519KeyId, /^ed25519:[0-9a-f]{16}$/);
  assert.match(keys.secp256k1KeyId, /^secp256k1:[0-9a-f]{16}$/);
  const again = generateWorkloadKeys();
  assert.notEqual(again.ed25519PublicKeyHex, keys.ed25519PublicKeyHex, "random keys differ");
});

Deno.test("signer: private keys never appear in JSON, inspection or enumerable properties", () => {
  const secret = new Uint8Array(32).fill(7);
  const seed = new Uint8Array(32).fill(9);
  const keys = generateWorkloadKeys({ secp256k1SecretKey: secret, ed25519Seed: seed });
  const dumps = [
    JSON.stringify(keys),
    Deno.inspect(keys, { depth: 10, showHidden: true }),
    JSON.stringify(Object.entries(keys)),
  ];
  for (const dump of dumps) {
    assert.ok(!dump.includes("07".repeat(32)));
    assert.ok(!dump.includes("09".repeat(32)));
  }
  assert.deepEqual(Object.keys(JSON.parse(dumps[0])).sort(), [
    "ed25519_key_id",
    "ed25519_public_key",
    "ethereum_address",
    "secp256k1_key_id",
    "secp256k1_public_key",
  ]);
  // Mutating the caller's buffer afterwards must not change the key.
  const before = keys.signEip191("x");
  secret.fill(1);
  assert.deepEqual(keys.signEip191("x"), before);
});

Deno.test("signer: buildKeyset lists the ed25519 then the secp256k1 key and validates inputs", () => {
  const keys = generateWorkloadKeys();
  const ks = buildKeyset({
    keys,
    subject: null,
    notAfter: 1900000000,
    tlsSpkiSha256s: ["ab".repeat(32), { spki_sha256: "cd".repeat(32), domain: "gw.example" }],
  });
  assert.deepEqual(ks.receipt_signing_keys, [
    { key_id: keys.ed25519KeyId, algo: "ed25519", public_key: keys.ed25519PublicKeyHex },
    { key_id: keys.secp256k1KeyId, algo: "secp256k1", public_key: keys.secp256k1PublicKeyHex },
  ]);
  assert.deepEqual(ks.tls_public_keys, [
    { spki_sha256: "ab".repeat(32) },
    { spki_sha256: "cd".repeat(32), domain: "gw.example" },
  ]);
  assert.deepEqual(ks.e2ee_public_keys, []);
  assert.match(keysetDigest(ks), /^sha256:[0-9a-f]{64}$/);
  assert.throws(() => buildKeyset({ keys, subject: null, notAfter: 1.5 }));
  assert.throws(() =>
    buildKeyset({ keys, subject: null, notAfter: 1900000000, tlsSpkiSha256s: ["AB".repeat(32)] })
  );
});
