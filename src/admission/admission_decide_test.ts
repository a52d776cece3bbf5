import assert from "node:assert/strict";
import type { KeyRecord } from "../keys/keys.ts";
import { DEFAULT_TIERS } from "./rate_limit.ts";
import { decideBatch, foldAccount, nearLimit, type Working } from "./admission_decide.ts";
import type { Admission, Pending } from "./admission_types.ts";
import type { AccountEntries } from "./account_cache.ts";

const T = 1_800_000_000_000;
const key: KeyRecord = {
  key_id: "k1",
  name: "t",
  tier: "free", // 60 rpm, 100k tpm
  created_at: 0,
  revoked_at: null,
  digest: "00",
};

/** An account's entries as KV returns them: balance, then state and five counters never written. */
function entries(balance: bigint): AccountEntries {
  const none: Deno.KvEntryMaybe<unknown> = { key: ["x"], value: null, versionstamp: null };
  return [
    { key: ["balance"], value: new Deno.KvU64(balance), versionstamp: "01" },
    none,
    none,
    none,
    none,
    none,
    none,
  ];
}

function pending(tokens: number, costNano: bigint, renewal = false): Pending {
  return {
    key,
    est: { tokens, costNano, requestId: "r" },
    ...(renewal ? { renewal: true as const } : {}),
    resolve: () => {},
    reject: () => {},
  };
}

const admit = (): Admission => ({ headers: {}, settlement: () => [] });

Deno.test("foldAccount: a lease folded back returns its credit and bucket use, and must be written", () => {
  const plain = foldAccount(entries(1_000n), key, DEFAULT_TIERS, T, undefined);
  assert.equal(plain.balance, 1_000n);
  assert.equal(plain.admitted, false);
  const back = {
    req: 3,
    tok: 300,
    credit: 50n,
    shownReq: 0,
    shownTok: 0,
    grantedAt: 0,
    lastUse: 0,
    size: { req: 3, tok: 300, credit: 50n },
  };
  const w = foldAccount(entries(1_000n), key, DEFAULT_TIERS, T, back);
  assert.equal(w.balance, 1_050n);
  assert.equal(w.released, 50n);
  assert.deepEqual(w.rate, { heldReq: 0, heldTok: 0, closedReq: 3, closedTok: 300 });
  assert.equal(w.admitted, true, "balance and state are rewritten with the lease returned");
});

Deno.test("decideBatch: admits in order until credits run out; refusals are outcomes, not throws", () => {
  const work = new Map<string, Working>([
    ["k1", foldAccount(entries(250n), key, DEFAULT_TIERS, T, undefined)],
  ]);
  const out = decideBatch(
    [pending(10, 100n), pending(10, 100n), pending(10, 100n)],
    work,
    DEFAULT_TIERS,
    false,
    admit,
  );
  assert.ok(out !== "stale");
  assert.deepEqual(out.map((o) => o.ok), [true, true, false]);
  const w = work.get("k1")!;
  assert.equal(w.balance, 50n);
  assert.equal(w.held, 200n);
  assert.equal(w.state.req, 2);
  const refused = out[2];
  assert.ok(!refused.ok && refused.error.kind === "insufficient_credits");
});

Deno.test("decideBatch: from cached entries, a decision near a limit or a refusal asks for a fresh read", () => {
  const fresh = () =>
    new Map<string, Working>([[
      "k1",
      foldAccount(entries(1_000n), key, DEFAULT_TIERS, T, undefined),
    ]]);
  // Far from every limit: decided from the cache.
  assert.notEqual(decideBatch([pending(10, 10n)], fresh(), DEFAULT_TIERS, true, admit), "stale");
  // Fewer than four more such requests fit in the balance: stale.
  assert.equal(decideBatch([pending(10, 300n)], fresh(), DEFAULT_TIERS, true, admit), "stale");
  // A refusal is never decided from the cache.
  assert.equal(decideBatch([pending(10, 5_000n)], fresh(), DEFAULT_TIERS, true, admit), "stale");
  // A renewal only sizes a slice: it admits nothing.
  const work = fresh();
  const out = decideBatch([pending(10, 10n, true)], work, DEFAULT_TIERS, false, admit);
  assert.deepEqual(out, [{ ok: true, admission: null }]);
  assert.equal(work.get("k1")!.admitted, false);
  assert.equal(work.get("k1")!.last?.tokens, 10);
});

Deno.test("nearLimit: four requests of room on the token bucket and the balance", () => {
  assert.equal(nearLimit(0, 1_000, 100, 1_000n, 10n), false);
  assert.equal(nearLimit(700, 1_000, 100, 1_000n, 10n), true);
  assert.equal(nearLimit(0, 1_000, 100, 39n, 10n), true);
  assert.equal(nearLimit(0, 1_000, 100, 0n, 0n), true);
});
