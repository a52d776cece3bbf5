/** Deno's own KV Connect client against the test server: the operations the gateway uses. */
import assert from "node:assert/strict";
import { startKvConnectServer } from "./kv_connect_server.ts";

Deno.test("Deno's remote KV client works against the KV Connect test server", async () => {
  let clock = Date.now();
  const server = startKvConnectServer({ now: () => clock });
  Deno.env.set("DENO_KV_ACCESS_TOKEN", server.token);
  const kv = await Deno.openKv(server.url);
  try {
    assert.equal((await kv.get(["missing"])).value, null);
    const set = await kv.set(["a", "x"], { n: 1, s: "text" });
    assert.ok(set.ok);
    const got = await kv.get<{ n: number }>(["a", "x"]);
    assert.deepEqual(got.value, { n: 1, s: "text" });
    assert.equal(got.versionstamp, set.versionstamp);

    await kv.set(["a", "y"], "two");
    await kv.set(["b"], "other prefix");
    const listed = await Array.fromAsync(kv.list({ prefix: ["a"] }));
    assert.deepEqual(listed.map((e) => e.key), [["a", "x"], ["a", "y"]]);
    const last = await Array.fromAsync(kv.list({ prefix: ["a"] }, { reverse: true, limit: 1 }));
    assert.deepEqual(last.map((e) => e.key), [["a", "y"]]);

    // Checked commits: a stale versionstamp loses, the current one wins.
    const stale = await kv.atomic().check({ key: ["a", "x"], versionstamp: null }).set(
      ["a", "x"],
      9,
    )
      .commit();
    assert.equal(stale.ok, false);
    const fresh = await kv.atomic().check(got).set(["a", "x"], 9).delete(["a", "y"]).commit();
    assert.ok(fresh.ok);
    assert.equal((await kv.get(["a", "x"])).value, 9);
    assert.equal((await kv.get(["a", "y"])).value, null);

    // Sums wrap modulo 2^64 like the local store's.
    await kv.atomic().sum(["n"], 5n).sum(["n"], 7n).commit();
    await kv.atomic().sum(["n"], (1n << 64n) - 2n).commit();
    assert.equal((await kv.get<Deno.KvU64>(["n"])).value?.value, 10n);

    // Expiry is honoured on read.
    await kv.set(["ttl"], "soon gone", { expireIn: 1_000 });
    assert.equal((await kv.get(["ttl"])).value, "soon gone");
    clock += 2_000;
    assert.equal((await kv.get(["ttl"])).value, null);

    assert.ok(server.store.served.reads > 0 && server.store.served.writes > 0);
  } finally {
    kv.close();
    await server.close();
  }
});

Deno.test("the KV Connect test server refuses a wrong access token", async () => {
  const server = startKvConnectServer();
  try {
    const res = await fetch(server.url, {
      method: "POST",
      headers: { authorization: "Bearer wrong", "content-type": "application/json" },
      body: JSON.stringify({ supportedVersions: [1, 2, 3] }),
    });
    assert.equal(res.status, 401);
    await res.body?.cancel();
  } finally {
    await server.close();
  }
});
