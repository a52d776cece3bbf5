import assert from "node:assert/strict";
import { GatewayError } from "../http/errors.ts";
import {
  AUTH_CACHE_TTL_MS,
  authenticate,
  createAuthenticator,
  createKey,
  getKey,
  keyDigest,
  listKeys,
  revokeKey,
} from "./keys.ts";
import { addCredits, getBalance } from "../admission/credits.ts";

const clock = (start = 1_700_000_000_000) => {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
};

async function assertInvalidKey(p: Promise<unknown>, secret?: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.kind, "invalid_api_key");
    assert.equal(e.status, 401);
    if (secret !== undefined) assert.ok(!e.message.includes(secret), "message echoes the key");
    return true;
  });
}

Deno.test("created key authenticates; record has the documented shape", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const { key, record } = await createKey(kv, { tier: "pro", name: "ci", now: c.now });
  assert.match(key, /^cgw-[A-Za-z0-9_-]{43}$/);
  assert.match(record.key_id, /^key_[0-9a-f]{12}$/);
  assert.equal(record.digest, keyDigest(key));
  const rec = await authenticate(kv, `Bearer ${key}`);
  assert.deepEqual(rec, record);
  assert.equal((await authenticate(kv, `bearer   ${key}`)).key_id, record.key_id);
  assert.deepEqual(await getKey(kv, record.key_id), record);
  assert.equal(await getKey(kv, "key_000000000000"), null);
  kv.close();
});

Deno.test("missing, malformed, foreign, unknown and revoked keys are invalid_api_key", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const { key, record } = await createKey(kv, { tier: "free", now: c.now });
  await assertInvalidKey(authenticate(kv, null));
  await assertInvalidKey(authenticate(kv, ""));
  await assertInvalidKey(authenticate(kv, `Basic ${key}`), key);
  await assertInvalidKey(authenticate(kv, key), key);
  await assertInvalidKey(authenticate(kv, "Bearer cgw-tooShort"), "cgw-tooShort");
  await assertInvalidKey(authenticate(kv, `Bearer ${key}x`), key);
  const foreign = ["sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "sk-ant-api03-abcdefgh12345678"];
  for (const f of foreign) {
    await assert.rejects(authenticate(kv, `Bearer ${f}`), (e: unknown) => {
      assert.ok(e instanceof GatewayError && e.kind === "invalid_api_key");
      assert.match(e.message, /other platforms/);
      assert.ok(!e.message.includes(f));
      return true;
    });
  }
  // Well-formed but never issued.
  const unknown = "cgw-" + "A".repeat(43);
  await assertInvalidKey(authenticate(kv, `Bearer ${unknown}`), unknown);
  await revokeKey(kv, record.key_id, c.now);
  await assertInvalidKey(authenticate(kv, `Bearer ${key}`), key);
  kv.close();
});

/** Renders any stored value so a substring search can see inside it. */
function dump(v: unknown): string {
  return JSON.stringify(v, (_k, x) => {
    if (typeof x === "bigint") return x.toString();
    if (x instanceof Uint8Array) return new TextDecoder().decode(x);
    if (x instanceof Deno.KvU64) return x.value.toString();
    return x;
  });
}

Deno.test("only the digest is stored: the key string appears nowhere in KV", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const keys: string[] = [];
  for (const tier of ["free", "pro", "enterprise"] as const) {
    keys.push((await createKey(kv, { tier, creditsNano: 5n, now: c.now })).key);
  }
  await authenticate(kv, `Bearer ${keys[0]}`);
  let entries = 0;
  for await (const e of kv.list({ prefix: [] })) {
    entries++;
    const text = dump(e.key) + dump(e.value);
    for (const k of keys) {
      assert.ok(!text.includes(k), "a key was stored");
      assert.ok(!text.includes(k.slice(4)), "a key body was stored");
    }
  }
  assert.ok(entries >= 6);
  kv.close();
});

Deno.test("positive cache serves within the TTL; revocation bites after it", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const { key, record } = await createKey(kv, { tier: "free", now: c.now });
  const auth = createAuthenticator(kv, { now: c.now });
  const header = `Bearer ${key}`;
  assert.equal((await auth.authenticate(header)).key_id, record.key_id);
  await revokeKey(kv, record.key_id, c.now);
  c.advance(AUTH_CACHE_TTL_MS - 1);
  assert.equal((await auth.authenticate(header)).key_id, record.key_id, "served from cache");
  c.advance(1);
  await assertInvalidKey(auth.authenticate(header), key);

  // invalidate() drops the entry at once.
  const second = await createKey(kv, { tier: "pro", now: c.now });
  const h2 = `Bearer ${second.key}`;
  await auth.authenticate(h2);
  await revokeKey(kv, second.record.key_id, c.now);
  auth.invalidate(second.record.key_id);
  await assertInvalidKey(auth.authenticate(h2), second.key);
  kv.close();
});

Deno.test("listKeys and revokeKey", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const a = await createKey(kv, { tier: "free", name: "a", now: c.now });
  const b = await createKey(kv, { tier: "enterprise", name: "b", rpm: 5, tpm: 50, now: c.now });
  const list = await listKeys(kv);
  assert.deepEqual(list.map((r) => r.key_id).sort(), [a.record.key_id, b.record.key_id].sort());
  assert.equal(list.find((r) => r.name === "b")?.rpm, 5);
  c.advance(10);
  const revoked = await revokeKey(kv, a.record.key_id, c.now);
  assert.equal(revoked?.revoked_at, c.now());
  c.advance(10);
  assert.equal((await revokeKey(kv, a.record.key_id, c.now))?.revoked_at, revoked?.revoked_at);
  assert.equal(await revokeKey(kv, "key_ffffffffffff", c.now), null);
  await assert.rejects(createKey(kv, { tier: "pro", rpm: 0, now: c.now }), RangeError);
  kv.close();
});

/** `kv` whose first `failures` commits fail the way SQLite does under another writer's lock. */
function lockedFirst(kv: Deno.Kv, failures: number): Deno.Kv {
  let commits = 0;
  return new Proxy(kv, {
    get(target, prop) {
      if (prop === "atomic") {
        return () => {
          const a = target.atomic();
          const commit = a.commit.bind(a);
          a.commit = () =>
            ++commits <= failures ? Promise.reject(new TypeError("database is locked")) : commit();
          return a;
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

Deno.test("create, revoke and credit ride out another process's write lock", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = clock();
  const { key, record } = await createKey(lockedFirst(kv, 3), {
    tier: "free",
    creditsNano: 5n,
    now: c.now,
  });
  assert.equal((await authenticate(kv, `Bearer ${key}`)).key_id, record.key_id);
  assert.equal(
    await addCredits(lockedFirst(kv, 2), record.key_id, 7n, () => Promise.resolve()),
    12n,
  );
  assert.equal(await getBalance(kv, record.key_id), 12n);
  const revoked = await revokeKey(lockedFirst(kv, 2), record.key_id, c.now);
  assert.equal(revoked?.revoked_at, c.now());
  kv.close();
});

Deno.test("two handles on one fresh file: creating keys never fails with a locked database", async () => {
  const path = await Deno.makeTempFile({ suffix: ".kv" });
  try {
    for (let round = 0; round < 5; round++) {
      const kv1 = await Deno.openKv(path);
      const kv2 = await Deno.openKv(path);
      const made = await Promise.all(
        Array.from(
          { length: 8 },
          (_, i) => createKey(i % 2 ? kv1 : kv2, { tier: "free", creditsNano: 1n, now: Date.now }),
        ),
      );
      assert.equal(new Set(made.map((m) => m.record.key_id)).size, 8);
      kv1.close();
      kv2.close();
    }
    const kv = await Deno.openKv(path);
    assert.equal((await listKeys(kv)).length, 40);
    kv.close();
  } finally {
    await Deno.remove(path);
  }
});

Deno.test("revoked and unknown keys do the same store work (#25 item 10): same reads, same order", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const c = clock();
    const { key, record } = await createKey(kv, { tier: "pro", now: c.now });
    await revokeKey(kv, record.key_id, c.now);
    const unknownKey = key.slice(0, -4) + (key.endsWith("aaaa") ? "bbbb" : "aaaa");
    // The store as authentication sees it, recording each read (the operation and how
    // many keys it asked for), which is what its time is made of.
    const trace = (log: string[]) =>
      new Proxy(kv, {
        get(target, prop) {
          const v = Reflect.get(target, prop, target);
          if (typeof v !== "function") return v;
          return (...args: unknown[]) => {
            const n = Array.isArray(args[0]) && Array.isArray(args[0][0]) ? args[0].length : 1;
            log.push(`${String(prop)}:${n}`);
            return v.apply(target, args);
          };
        },
      });
    const revokedReads: string[] = [];
    const unknownReads: string[] = [];
    await assertInvalidKey(authenticate(trace(revokedReads), `Bearer ${key}`));
    await assertInvalidKey(authenticate(trace(unknownReads), `Bearer ${unknownKey}`));
    assert.ok(revokedReads.length > 0);
    assert.deepEqual(unknownReads, revokedReads);
    // And a live key reads no more than they do.
    const live = await createKey(kv, { tier: "pro", now: c.now });
    const liveReads: string[] = [];
    await authenticate(trace(liveReads), `Bearer ${live.key}`);
    assert.deepEqual(liveReads, revokedReads);
  } finally {
    kv.close();
  }
});
