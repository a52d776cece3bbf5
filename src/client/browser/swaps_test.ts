import assert from "node:assert/strict";
import { BROWSER_SWAPS } from "./build.ts";
import * as nodeAead from "../../e2ee/aead.ts";
import * as browserAead from "./aead.ts";
import * as nodeDigest from "../../aci/digest.ts";
import * as browserDigest from "../../verify/browser/digest.ts";
import { decryptField, encryptField, generateKeyPair, X25519_ALGO } from "../../e2ee/crypto.ts";
import { bytesToHex } from "../../aci/hex.ts";
import { randomBytes } from "../random.ts";

const ROOT = new URL("../../../", import.meta.url);

Deno.test("each browser swap exports every name its original exports (that the client uses)", async () => {
  for (const [from, to] of Object.entries(BROWSER_SWAPS)) {
    const original = Object.keys(await import(new URL(from, ROOT).href));
    const swapped = new Set(Object.keys(await import(new URL(to, ROOT).href)));
    // ed25519's browser build verifies only: the client never signs.
    const needed = from.endsWith("ed25519.ts")
      ? original.filter((n) => n === "ed25519Verify")
      : original;
    for (const n of needed) assert.ok(swapped.has(n), `${to} lacks ${n} (exported by ${from})`);
  }
});

Deno.test("browser AES-256-GCM and HKDF agree with node:crypto both ways, and refuse a flipped bit", () => {
  const shared = crypto.getRandomValues(new Uint8Array(32));
  const key = nodeAead.hkdfAesKey(shared, "aci.e2ee.v2.x25519");
  assert.deepEqual(browserAead.hkdfAesKey(shared, "aci.e2ee.v2.x25519"), key);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const aad = new TextEncoder().encode('{"purpose":"test"}');
  for (const len of [0, 1, 15, 16, 17, 1000]) {
    const pt = crypto.getRandomValues(new Uint8Array(len));
    const a = nodeAead.gcmSeal(key, iv, pt, aad);
    const b = browserAead.gcmSeal(key, iv, pt, aad);
    assert.deepEqual(a, b);
    assert.deepEqual(browserAead.gcmOpen(key, iv, a, aad), pt);
    assert.deepEqual(nodeAead.gcmOpen(key, iv, b, aad), pt);
    const bad = a.slice();
    bad[bad.length - 1] ^= 1;
    assert.throws(() => browserAead.gcmOpen(key, iv, bad, aad));
    assert.throws(() => nodeAead.gcmOpen(key, iv, bad, aad));
  }
});

Deno.test("a field sealed by the shared cipher opens (and an AAD change fails) after the swap", () => {
  const r = generateKeyPair(X25519_ALGO);
  const aad = new TextEncoder().encode("aad");
  const v = encryptField(
    X25519_ALGO,
    bytesToHex(r.publicKey),
    new Uint8Array([1, 2, 3]),
    aad,
    (n) => crypto.getRandomValues(new Uint8Array(n)),
  );
  assert.deepEqual(decryptField(X25519_ALGO, r.secretKey, v, aad), new Uint8Array([1, 2, 3]));
  assert.equal(decryptField(X25519_ALGO, r.secretKey, v, new Uint8Array([0])), null);
});

Deno.test("browser SHA-256 agrees with node:crypto, whole and incremental", () => {
  const data = randomBytes(70_000);
  assert.equal(browserDigest.sha256Prefixed(data), nodeDigest.sha256Prefixed(data));
  const a = new browserDigest.BodyHasher();
  const b = new nodeDigest.BodyHasher();
  for (let o = 0; o < data.length; o += 4_096) {
    a.update(data.subarray(o, o + 4_096));
    b.update(data.subarray(o, o + 4_096));
  }
  assert.equal(a.digest(), b.digest());
});

Deno.test("browser X25519 agrees with node:crypto (public keys, shared secrets, low-order refusal)", async () => {
  const node = await import("../../e2ee/x25519.ts");
  const browser = await import("./x25519.ts");
  for (let i = 0; i < 8; i++) {
    const a = randomBytes(32);
    const b = randomBytes(32);
    const pa = node.x25519PublicKey(a);
    assert.deepEqual(browser.x25519PublicKey(a), pa);
    const pb = browser.x25519PublicKey(b);
    assert.deepEqual(node.x25519SharedSecret(a, pb), browser.x25519SharedSecret(a, pb));
    assert.deepEqual(node.x25519SharedSecret(b, pa), node.x25519SharedSecret(a, pb));
  }
  const zero = new Uint8Array(32);
  assert.throws(() => node.x25519SharedSecret(randomBytes(32), zero));
  assert.throws(() => browser.x25519SharedSecret(randomBytes(32), zero));
});
