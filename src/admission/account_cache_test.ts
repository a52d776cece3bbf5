import assert from "node:assert/strict";
import { AccountCache } from "./account_cache.ts";
import { balanceKey, EMPTY_STATE, stateKey } from "../keys/kv_layout.ts";

Deno.test("account cache: a read is reused for 500 ms, a lost race forgets it, a commit updates it", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    await kv.set(balanceKey("k1"), new Deno.KvU64(7n));
    let t = 1_000;
    const cache = new AccountCache(kv, () => t);
    assert.equal(cache.cached(["k1"]), null, "nothing read yet");
    const read = await cache.read(["k1"]);
    const entries = read.get("k1")!;
    assert.equal(entries.length, 7);
    assert.equal((entries[0].value as Deno.KvU64).value, 7n);
    t += 500;
    assert.equal(cache.cached(["k1"])?.get("k1"), entries, "reused within 500 ms");
    t += 1;
    assert.equal(cache.cached(["k1"]), null, "too old");
    t = 999;
    assert.equal(cache.cached(["k1"]), null, "a clock that went back is not trusted");

    t = 2_000;
    await cache.read(["k1"]);
    cache.forget(["k1"]);
    assert.equal(cache.cached(["k1"]), null, "forgotten after a lost race");

    const fresh = (await cache.read(["k1"])).get("k1")!;
    const state = { ...EMPTY_STATE, at: t, req: 1, tok: 10 };
    cache.written("k1", fresh, 5n, state, "00000000000000ff0000", t + 100);
    const now = cache.cached(["k1"])!.get("k1")!;
    assert.equal((now[0].value as Deno.KvU64).value, 5n);
    assert.deepEqual(now[0].key, balanceKey("k1"));
    assert.deepEqual(now[1], {
      key: stateKey("k1"),
      value: state,
      versionstamp: "00000000000000ff0000",
    });
    assert.equal(now[2], fresh[2], "the counters stay as read");
    t += 501;
    assert.equal(cache.cached(["k1"]), null, "a commit keeps the read's time, so it still expires");
  } finally {
    kv.close();
  }
});
