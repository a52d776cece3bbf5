import assert from "node:assert/strict";
import { GatewayError } from "../http/errors.ts";
import { GroupCommitter } from "../store/group_commit.ts";
import { createAdmitter } from "./admission.ts";
import {
  addCredits,
  formatCredits,
  getBalance,
  getUsage,
  MAX_BALANCE_NANO,
  NANO_PER_CREDIT,
  parseCredits,
} from "./credits.ts";
import { createKey } from "../keys/keys.ts";
import { DEFAULT_TIERS } from "./rate_limit.ts";

const T0 = 1_700_000_000_000;

async function setup(creditsNano: bigint) {
  const kv = await Deno.openKv(":memory:");
  const now = () => T0;
  const { record } = await createKey(kv, { tier: "pro", creditsNano, now });
  const admitter = createAdmitter(kv, { tiers: DEFAULT_TIERS, now });
  const gc = new GroupCommitter(kv);
  return { kv, key: record, admitter, gc };
}

function isInsufficient(e: unknown): boolean {
  return e instanceof GatewayError && e.kind === "insufficient_credits" && e.status === 403;
}

Deno.test("parseCredits/formatCredits convert exactly and reject bad numbers", () => {
  assert.equal(parseCredits("1"), NANO_PER_CREDIT);
  assert.equal(parseCredits("0.000000001"), 1n);
  assert.equal(parseCredits("12.5"), 12_500_000_000n);
  assert.equal(parseCredits("0"), 0n);
  for (const bad of ["", "-1", "1e3", "1.0000000001", ".5", "5.", "0x10", " 1", "NaN", "1,5"]) {
    assert.throws(() => parseCredits(bad), RangeError, bad);
  }
  assert.throws(() => parseCredits("99999999999"), RangeError);
  assert.equal(formatCredits(12_500_000_000n), "12.5");
  assert.equal(formatCredits(1n), "0.000000001");
  assert.equal(formatCredits(-1_500_000_000n), "-1.5");
  assert.equal(formatCredits(parseCredits("123.456789")), "123.456789");
});

Deno.test("addCredits adds exactly, refuses unknown keys, non-positive and overflowing amounts", async () => {
  const { kv, key } = await setup(0n);
  assert.equal(await addCredits(kv, key.key_id, 7n), 7n);
  assert.equal(await addCredits(kv, key.key_id, 3n), 10n);
  assert.equal(await getBalance(kv, key.key_id), 10n);
  await assert.rejects(addCredits(kv, "key_000000000000", 1n), GatewayError);
  await assert.rejects(addCredits(kv, key.key_id, 0n), RangeError);
  await assert.rejects(addCredits(kv, key.key_id, MAX_BALANCE_NANO), RangeError);
  assert.equal(await getBalance(kv, key.key_id), 10n);
  kv.close();
});

Deno.test("reserve then settle below the estimate refunds the difference", async () => {
  const { kv, key, admitter, gc } = await setup(1_000n);
  const adm = await admitter.admit(key, { tokens: 10, costNano: 300n, requestId: "r1" });
  assert.equal(await getBalance(kv, key.key_id), 700n, "estimate reserved");
  await gc.write(adm.settlement({ promptTokens: 4, completionTokens: 2, costNano: 120n }));
  assert.equal(await getBalance(kv, key.key_id), 880n, "charged exactly the actual cost");
  assert.deepEqual(await getUsage(kv, key.key_id), {
    requests: 1n,
    prompt_tokens: 4n,
    completion_tokens: 2n,
    spent_nano: 120n,
  });
  kv.close();
});

Deno.test("an overrun is recorded and the balance ends down by exactly the actual cost", async () => {
  const { kv, key, admitter, gc } = await setup(1_000n);
  const adm = await admitter.admit(key, { tokens: 10, costNano: 100n, requestId: "r1" });
  await gc.write(adm.settlement({ promptTokens: 5, completionTokens: 50, costNano: 400n }));
  assert.equal(await getBalance(kv, key.key_id), 600n);
  // The next admission folds the debt into the stored balance.
  const adm2 = await admitter.admit(key, { tokens: 1, costNano: 50n, requestId: "r2" });
  assert.equal(await getBalance(kv, key.key_id), 550n);
  await gc.write(adm2.settlement({ promptTokens: 1, completionTokens: 0, costNano: 50n }));
  assert.equal(await getBalance(kv, key.key_id), 550n);
  assert.equal((await getUsage(kv, key.key_id)).spent_nano, 450n);
  kv.close();
});

Deno.test("an overrun beyond the balance leaves debt that blocks further admissions", async () => {
  const { kv, key, admitter, gc } = await setup(100n);
  const adm = await admitter.admit(key, { tokens: 1, costNano: 100n, requestId: "r1" });
  await gc.write(adm.settlement({ promptTokens: 1, completionTokens: 1, costNano: 130n }));
  assert.equal(await getBalance(kv, key.key_id), -30n);
  await assert.rejects(
    admitter.admit(key, { tokens: 1, costNano: 0n, requestId: "r2" }),
    isInsufficient,
  );
  await addCredits(kv, key.key_id, 50n);
  assert.equal(await getBalance(kv, key.key_id), 20n);
  await admitter.admit(key, { tokens: 1, costNano: 20n, requestId: "r3" });
  assert.equal(await getBalance(kv, key.key_id), 0n);
  kv.close();
});

Deno.test("settlement is idempotent: a second settle adds nothing", async () => {
  const { kv, key, admitter, gc } = await setup(1_000n);
  const adm = await admitter.admit(key, { tokens: 10, costNano: 300n, requestId: "r1" });
  const actual = { promptTokens: 3, completionTokens: 3, costNano: 200n };
  await gc.write(adm.settlement(actual));
  assert.deepEqual(adm.settlement(actual), []);
  await gc.write(adm.settlement(actual));
  assert.equal(await getBalance(kv, key.key_id), 800n);
  assert.equal((await getUsage(kv, key.key_id)).requests, 1n);
  kv.close();
});

Deno.test("a balance that cannot cover the estimate gets 403 insufficient_credits", async () => {
  const { kv, key, admitter } = await setup(99n);
  await assert.rejects(
    admitter.admit(key, { tokens: 1, costNano: 100n, requestId: "r1" }),
    isInsufficient,
  );
  assert.equal(await getBalance(kv, key.key_id), 99n, "a rejection reserves nothing");
  const empty = await createKey(kv, { tier: "free", now: () => T0 });
  await assert.rejects(
    admitter.admit(empty.record, { tokens: 1, costNano: 0n, requestId: "r2" }),
    isInsufficient,
  );
  kv.close();
});

Deno.test("racing requests never overdraw: exactly floor(balance / cost) are admitted", async () => {
  const { kv, key, admitter, gc } = await setup(1_000n);
  const results = await Promise.allSettled(
    Array.from(
      { length: 50 },
      (_, i) => admitter.admit(key, { tokens: 1, costNano: 70n, requestId: `r${i}` }),
    ),
  );
  const admitted = results.filter((r) => r.status === "fulfilled");
  assert.equal(admitted.length, 14);
  assert.ok(results.every((r) => r.status === "fulfilled" || isInsufficient(r.reason)));
  assert.equal(await getBalance(kv, key.key_id), 20n);
  // Settle them all at actual cost; the balance ends exactly at 1000 - sum(actual).
  let spent = 0n;
  await Promise.all(admitted.map((r, i) => {
    if (r.status !== "fulfilled") throw new Error("unreachable");
    const cost = BigInt(60 + (i % 3) * 5);
    spent += cost;
    return gc.write(r.value.settlement({ promptTokens: 1, completionTokens: 1, costNano: cost }));
  }));
  assert.equal(await getBalance(kv, key.key_id), 1_000n - spent);
  assert.equal((await getUsage(kv, key.key_id)).spent_nano, spent);
  kv.close();
});
