import assert from "node:assert/strict";
import { createCacheSalter, refuseClientSalt, saltDigest, withSalt } from "./cache_salt.ts";

Deno.test("cache salts: keyed per secret and key, refused from clients, added to object bodies", () => {
  const a = createCacheSalter(new Uint8Array(32).fill(1));
  const b = createCacheSalter(new Uint8Array(32).fill(2));
  assert.equal(a.saltFor("d1"), a.saltFor("d1"));
  assert.notEqual(a.saltFor("d1"), a.saltFor("d2"));
  assert.notEqual(a.saltFor("d1"), b.saltFor("d1"), "another secret, another salt");
  assert.throws(() => createCacheSalter(new Uint8Array(16)), /32 bytes/);
  assert.match(saltDigest("x"), /^sha256:[0-9a-f]{64}$/);
  assert.throws(() => refuseClientSalt({ cache_salt: "mine" }), /cache_salt/);
  assert.throws(() => refuseClientSalt({ cache_salt: null }), /cache_salt/);
  refuseClientSalt({ model: "m" });
  refuseClientSalt(null);
  assert.deepEqual(withSalt({ model: "m" }, "s"), { model: "m", cache_salt: "s" });
  assert.deepEqual(withSalt([1], "s"), [1]);
});
