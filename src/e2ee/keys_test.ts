import assert from "node:assert/strict";
import { createE2eeKeyring } from "./keys.ts";
import { createIdentity } from "../attestation/identity.ts";
import { encryptField, requestAad, SECP256K1_ALGO, X25519_ALGO } from "./crypto.ts";
import { randomBytes } from "node:crypto";

const rnd = (n: number) => new Uint8Array(randomBytes(n));

Deno.test("keyring: one key per suite, X25519 first; find accepts either spelling; secrets stay inside", () => {
  const ring = createE2eeKeyring();
  assert.deepEqual(ring.entries.map((e) => e.algo), [X25519_ALGO, SECP256K1_ALGO]);
  const k = ring.entries[1];
  assert.equal(ring.find("0x" + k.public_key.slice(2).toUpperCase())?.keyId, k.key_id);
  assert.equal(ring.find("ab".repeat(32)), null);
  assert.deepEqual(JSON.parse(JSON.stringify(ring)), ring.entries);
  const key = ring.find(ring.entries[0].public_key)!;
  const ctx = { algo: X25519_ALGO, model: "m", nonce: "00".repeat(32), ts: 1 } as const;
  const ad = requestAad(ctx, "prompt");
  const v = encryptField(X25519_ALGO, key.publicKeyHex, new TextEncoder().encode("x"), ad, rnd);
  assert.equal(new TextDecoder().decode(ring.decrypt(key, v, ad)!), "x");
  // A different keyring's key cannot open it.
  const other = createE2eeKeyring();
  assert.equal(other.decrypt(other.find(other.entries[0].public_key)!, v, ad), null);
});

Deno.test("identity: E2EE keys rotate with the keyset; a shared seed gives replicas the same keys per epoch", () => {
  let now = 1_750_000_000_000;
  const ttl = 3600;
  const plain = createIdentity({ subject: null, ttlSeconds: ttl, now: () => now });
  const first = plain.current();
  assert.deepEqual(first.keyset.e2ee_public_keys, first.e2ee.entries);
  const seed = new Uint8Array(32).fill(9);
  const a = createIdentity({ subject: null, ttlSeconds: ttl, now: () => now, e2eeSeed: seed });
  now += 1234_000; // a replica started later in the same epoch
  const b = createIdentity({ subject: null, ttlSeconds: ttl, now: () => now, e2eeSeed: seed });
  assert.deepEqual(a.current().keyset.e2ee_public_keys, b.current().keyset.e2ee_public_keys);
  assert.notDeepEqual(
    a.current().keyset.receipt_signing_keys,
    b.current().keyset.receipt_signing_keys,
  );
  // Both rotate at the epoch boundary, to the same new keys.
  const before = a.current().keyset.e2ee_public_keys;
  const boundary = (Math.floor(now / 1000 / ttl) + 1) * ttl;
  assert.equal(a.current().keyset.not_after, boundary + ttl / 10);
  now = boundary * 1000;
  assert.notDeepEqual(a.current().keyset.e2ee_public_keys, before);
  assert.deepEqual(a.current().keyset.e2ee_public_keys, b.current().keyset.e2ee_public_keys);
  // Without a seed a rotation makes fresh keys too.
  now += ttl * 1000;
  assert.notDeepEqual(plain.current().keyset.e2ee_public_keys, first.keyset.e2ee_public_keys);
});
