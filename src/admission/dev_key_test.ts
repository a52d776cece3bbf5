import assert from "node:assert/strict";
import { devKey } from "./dev_key.ts";
import { listKeys, revokeKey } from "../keys/keys.ts";

Deno.test("the dev key is reused across restarts while it authenticates", async () => {
  const kv = await Deno.openKv(":memory:");
  let file: string | null = null;
  const deps = {
    kv,
    now: Date.now,
    read: () => Promise.resolve(file),
    save: (k: string) => {
      file = k;
      return Promise.resolve();
    },
  };
  const first = await devKey(deps);
  assert.equal(first.reused, false);
  const second = await devKey(deps);
  assert.deepEqual(second, { key: first.key, reused: true });
  assert.equal((await listKeys(kv)).length, 1, "no new key per restart");
  // Revoked (or a wiped store): a new key replaces it.
  await revokeKey(kv, (await listKeys(kv))[0].key_id, Date.now);
  const third = await devKey(deps);
  assert.equal(third.reused, false);
  assert.notEqual(third.key, first.key);
  assert.equal(file, third.key);
  file = "garbage";
  assert.equal((await devKey(deps)).reused, false);
  kv.close();
});
