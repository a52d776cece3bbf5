import assert from "node:assert/strict";
import type { KvWrite } from "../store/group_commit.ts";
import type { KeyRecord } from "../keys/keys.ts";
import { creditRefundKey, EMPTY_STATE, reqRefundKey, tokRefundKey } from "../keys/kv_layout.ts";
import { holdKey } from "./holds.ts";
import { DEFAULT_TIERS } from "./rate_limit.ts";
import { LeasePool } from "./lease_pool.ts";
import type { Working } from "./admission_decide.ts";
import type { Pending } from "./admission_types.ts";

const key: KeyRecord = {
  key_id: "k1",
  name: "t",
  tier: "pro", // 600 rpm, 1M tpm
  created_at: 0,
  revoked_at: null,
  digest: "00",
};
const est = { tokens: 100, costNano: 10n, requestId: "r" };
const pending: Pending = { key, est, resolve: () => {}, reject: () => {} };

function working(balance: bigint): Working {
  return {
    balance,
    state: EMPTY_STATE,
    unpaid: 0n,
    admitted: true,
    last: est,
    held: 0n,
    released: 0n,
    rate: { heldReq: 0, heldTok: 0, closedReq: 0, closedTok: 0 },
    entries: [],
  };
}

function pool(sole: boolean, t: { now: number }, writes: KvWrite[][]) {
  return new LeasePool({
    write: (ops) => {
      writes.push(ops);
      return Promise.resolve();
    },
    soleReplica: () => Promise.resolve(sole),
    monotonic: () => t.now,
    holdInstance: "i1",
    leaseMaxRequests: 4,
    tiers: DEFAULT_TIERS,
  });
}

Deno.test("lease pool: a granted slice is reserved in the batch, admits from memory, asks one renewal, is gone on close", async () => {
  const t = { now: 0 };
  const writes: KvWrite[][] = [];
  const p = pool(true, t, writes);
  const w = working(1_000n);
  const granted = await p.grant([pending], new Map([["k1", w]]));
  const slice = granted.get("k1")!;
  // 4 requests' worth at most (leaseMaxRequests), taken from the balance and the buckets.
  assert.deepEqual([slice.req, slice.tok, slice.credit], [4, 400, 40n]);
  assert.equal(w.balance, 960n);
  assert.equal(w.held, 40n);
  assert.equal(w.state.req, 4);
  assert.equal(p.take(key, est, () => {}), null, "not live before the commit lands");

  p.committed(["k1"], granted);
  let renewals = 0;
  for (let i = 0; i < 4; i++) {
    t.now += 10;
    assert.ok(p.take(key, est, () => renewals++), `request ${i} from the lease`);
  }
  assert.equal(p.take(key, est, () => renewals++), null, "the slice is used up");
  assert.equal(renewals, 1, "a renewal is asked once per slice");

  await p.close();
  assert.equal(p.take(key, est, () => {}), null, "closed: nothing from memory");
  assert.deepEqual(writes, [], "a used-up slice has nothing to hand back");
});

Deno.test("lease pool: a slice past half its life is renewed by the sweep, not by the request that finds it so", async () => {
  const t = { now: 0 };
  const writes: KvWrite[][] = [];
  const p = pool(true, t, writes);
  const granted = await p.grant([pending], new Map([["k1", working(1_000n)]]));
  p.committed(["k1"], granted);
  let asked = 0;
  t.now = 600; // past half the 1 s lifetime, far from running low (3 of 4 left)
  assert.ok(p.take(key, est, () => asked++));
  assert.equal(asked, 0, "the request goes on without asking");
  // The sweep runs every 250 ms (real time): it asks once, with the last request's renewal.
  const deadline = Date.now() + 2_000;
  while (asked === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  assert.equal(asked, 1, "asked by the sweep");
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(asked, 1, "once per slice");
  await p.close();
});

Deno.test("lease pool: the slice's requests and tokens are held in the ledger; a hand-back closes the unused part", async () => {
  const t = { now: 0 };
  const writes: KvWrite[][] = [];
  const p = pool(true, t, writes);
  const w = working(1_000n);
  const granted = await p.grant([pending], new Map([["k1", w]]));
  // The admission commit writes these as req_reserved / tok_reserved (admission_commit.ts).
  assert.deepEqual(w.rate, { heldReq: 4, heldTok: 400, closedReq: 0, closedTok: 0 });
  p.committed(["k1"], granted);
  assert.ok(p.take(key, est, () => {}));
  assert.ok(p.take(key, est, () => {}));
  await p.close();
  // The two requests taken close their share when settled (admission_settlement.ts).
  assert.deepEqual(writes, [[
    { op: "sum", key: creditRefundKey("k1"), value: 20n },
    { op: "sum", key: reqRefundKey("k1"), value: 2n },
    { op: "sum", key: tokRefundKey("k1"), value: 200n },
    // Deferred into the replica's pending row (store/deferred_sums.ts).
    { op: "defer", key: holdKey("i1", "k1", "closed"), value: 20n },
    { op: "defer", key: holdKey("i1", "k1", "req_closed"), value: 2n },
    { op: "defer", key: holdKey("i1", "k1", "tok_closed"), value: 200n },
  ]]);
});

Deno.test("lease pool: no slice unless sole replica; a detached lease is restored when its batch fails", async () => {
  const t = { now: 0 };
  const writes: KvWrite[][] = [];
  const shared = pool(false, t, writes);
  assert.equal((await shared.grant([pending], new Map([["k1", working(1_000n)]]))).size, 0);

  const p = pool(true, t, writes);
  const granted = await p.grant([pending], new Map([["k1", working(1_000n)]]));
  p.committed(["k1"], granted);
  p.detach("k1");
  assert.equal(p.take(key, est, () => {}), null, "detached while a batch folds it back");
  assert.equal(p.detachedOf("k1")?.req, 4);
  p.restore([pending]);
  assert.ok(p.take(key, est, () => {}), "in use again after the batch failed");
  await p.close();
  const back = writes.at(-1)!;
  assert.ok(
    back.some((op) => op.op === "sum" && String(op.key) === String(reqRefundKey("k1"))),
    "the unused requests go back on close",
  );
});
