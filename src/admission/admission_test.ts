import assert from "node:assert/strict";
import { GatewayError } from "../http/errors.ts";
import { GroupCommitter } from "../store/group_commit.ts";
import { type AdmissionKv, createAdmitter } from "./admission.ts";
import { getBalance } from "./credits.ts";
import { createKey, type KeyRecord } from "../keys/keys.ts";
import { DEFAULT_TIERS, readRateWindow } from "./rate_limit.ts";
import { LEASE_IDLE_MS } from "./leases.ts";
import type { CommitLane } from "./admission_types.ts";
import type { KvWrite } from "../store/group_commit.ts";

const T0 = 1_700_000_010_000;
const now = () => T0;

interface Counts {
  commits: number;
  reads: number;
  failFirstCommits: number;
  /** Commits not yet answered (the lease tests wait on them, not on time). */
  inflight?: Set<Promise<unknown>>;
}

/** Counts reads and commits; can make the first commits fail with a lock error. */
function instrument(kv: Deno.Kv, counts: Counts): AdmissionKv {
  return {
    getMany: ((keys: Deno.KvKey[], o?: { consistency?: Deno.KvConsistencyLevel }) => {
      counts.reads++;
      return kv.getMany(keys, o);
    }) as Deno.Kv["getMany"],
    atomic() {
      const a = kv.atomic();
      const commit = a.commit.bind(a);
      a.commit = () => {
        counts.commits++;
        if (counts.commits <= counts.failFirstCommits) {
          return Promise.reject(new TypeError("database is locked"));
        }
        const p = commit();
        const inflight = counts.inflight;
        if (inflight) {
          // Tracked whatever the outcome (the admitter handles failures itself).
          const settled: Promise<unknown> = p.then(
            () => inflight.delete(settled),
            () => inflight.delete(settled),
          );
          inflight.add(settled);
        }
        return p;
      };
      return a;
    },
  };
}

const est = (i: number, costNano = 1n) => ({ tokens: 1, costNano, requestId: `r${i}` });

Deno.test("concurrent admissions of one process share one read round and one commit", async () => {
  const kv = await Deno.openKv(":memory:");
  const keys: KeyRecord[] = [];
  for (let i = 0; i < 3; i++) {
    keys.push((await createKey(kv, { tier: "pro", creditsNano: 1_000n, now })).record);
  }
  const counts: Counts = { commits: 0, reads: 0, failFirstCommits: 0 };
  const admitter = createAdmitter(instrument(kv, counts), { tiers: DEFAULT_TIERS, now });
  const all = await Promise.all(
    Array.from({ length: 90 }, (_, i) => admitter.admit(keys[i % 3], est(i, 10n))),
  );
  assert.equal(all.length, 90);
  assert.equal(counts.commits, 1);
  assert.equal(counts.reads, 3, "one read round: a getMany of 7 entries per key, in parallel");
  for (const k of keys) {
    assert.equal(await getBalance(kv, k.key_id), 700n);
    assert.equal((await readRateWindow(kv, k, DEFAULT_TIERS, T0)).requests, 30);
  }
  kv.close();
});

Deno.test("more keys than one batch holds are split over several commits, still exact", async () => {
  const kv = await Deno.openKv(":memory:");
  const keys: KeyRecord[] = [];
  for (let i = 0; i < 7; i++) {
    keys.push((await createKey(kv, { tier: "free", creditsNano: 5n, now })).record);
  }
  const counts: Counts = { commits: 0, reads: 0, failFirstCommits: 0 };
  const admitter = createAdmitter(instrument(kv, counts), {
    tiers: DEFAULT_TIERS,
    now,
    maxKeysPerBatch: 3,
  });
  const results = await Promise.allSettled(
    Array.from({ length: 70 }, (_, i) => admitter.admit(keys[i % 7], est(i, 1n))),
  );
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 35, "5 per key");
  assert.equal(counts.commits, 3);
  for (const k of keys) assert.equal(await getBalance(kv, k.key_id), 0n);
  kv.close();
});

Deno.test("a lock error during admission is retried with backoff", async () => {
  const kv = await Deno.openKv(":memory:");
  const { record } = await createKey(kv, { tier: "free", creditsNano: 100n, now });
  const counts: Counts = { commits: 0, reads: 0, failFirstCommits: 2 };
  const slept: number[] = [];
  const admitter = createAdmitter(instrument(kv, counts), {
    tiers: DEFAULT_TIERS,
    now,
    sleep: (ms) => (slept.push(ms), Promise.resolve()),
    random: () => 0,
  });
  const a = await admitter.admit(record, est(1, 40n));
  assert.equal(a.headers["X-RateLimit-Remaining"], "59");
  assert.equal(counts.commits, 3);
  assert.equal(slept.length, 2);
  assert.equal(await getBalance(kv, record.key_id), 60n);
  kv.close();
});

Deno.test("bad estimates are refused before touching KV", async () => {
  const kv = await Deno.openKv(":memory:");
  const { record } = await createKey(kv, { tier: "free", creditsNano: 100n, now });
  const admitter = createAdmitter(kv, { tiers: DEFAULT_TIERS, now });
  await assert.rejects(
    admitter.admit(record, { tokens: -1, costNano: 1n, requestId: "a" }),
    RangeError,
  );
  await assert.rejects(
    admitter.admit(record, { tokens: 1.5, costNano: 1n, requestId: "b" }),
    RangeError,
  );
  await assert.rejects(
    admitter.admit(record, { tokens: 1, costNano: -1n, requestId: "c" }),
    RangeError,
  );
  const ok = await admitter.admit(record, est(1));
  assert.throws(
    () => ok.settlement({ promptTokens: -1, completionTokens: 0, costNano: 0n }),
    RangeError,
  );
  assert.equal(await getBalance(kv, record.key_id), 99n);
  kv.close();
});

Deno.test("two KV handles on one file share one rate limit and one balance exactly", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/accounts.sqlite`;
  const kv1 = await Deno.openKv(path);
  const kv2 = await Deno.openKv(path);
  try {
    const limited = (await createKey(kv1, { tier: "free", creditsNano: 1_000_000n, now })).record;
    const funded = (await createKey(kv1, { tier: "pro", creditsNano: 1_000n, now })).record;
    const a1 = createAdmitter(kv1, { tiers: DEFAULT_TIERS, now });
    const a2 = createAdmitter(kv2, { tiers: DEFAULT_TIERS, now });
    // Settle each promise as it is made (rejections arrive while the loop yields).
    const settle = (p: Promise<unknown>) =>
      p.then(() => null, (e: unknown) => {
        assert.ok(e instanceof GatewayError, String(e));
        assert.ok(["rate_limited", "insufficient_credits"].includes(e.kind));
        return e;
      });
    const limitedJobs: Promise<GatewayError | null>[] = [];
    const fundedJobs: Promise<GatewayError | null>[] = [];
    for (let i = 0; i < 100; i++) {
      const admitter = i % 2 === 0 ? a1 : a2;
      limitedJobs.push(settle(admitter.admit(limited, est(i))));
      fundedJobs.push(
        settle(admitter.admit(funded, { tokens: 1, costNano: 30n, requestId: `f${i}` })),
      );
      // Spread arrivals so both handles run many overlapping batches.
      if (i % 10 === 0) await new Promise((r) => setTimeout(r, 0));
    }
    const limitedOk = (await Promise.all(limitedJobs)).filter((e) => e === null).length;
    const fundedOk = (await Promise.all(fundedJobs)).filter((e) => e === null).length;
    assert.equal(limitedOk, 60);
    assert.equal(fundedOk, 33);
    assert.equal(await getBalance(kv2, funded.key_id), 10n);
    assert.equal(await getBalance(kv1, limited.key_id), 1_000_000n - 60n);

    // Settlements from both handles land exactly too.
    const gc1 = new GroupCommitter(kv1), gc2 = new GroupCommitter(kv2);
    const more = await Promise.all([
      a1.admit(funded, { tokens: 1, costNano: 5n, requestId: "s1" }),
      a2.admit(funded, { tokens: 1, costNano: 5n, requestId: "s2" }),
    ]);
    await Promise.all([
      gc1.write(more[0].settlement({ promptTokens: 1, completionTokens: 0, costNano: 1n })),
      gc2.write(more[1].settlement({ promptTokens: 1, completionTokens: 0, costNano: 2n })),
    ]);
    assert.equal(await getBalance(kv1, funded.key_id), 7n);
  } finally {
    kv1.close();
    kv2.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a repeat admission far from every limit reuses the cached entries (no read)", async () => {
  const kv = await Deno.openKv(":memory:");
  const key = (await createKey(kv, { tier: "pro", creditsNano: 1_000_000n, now })).record;
  const counts: Counts = { commits: 0, reads: 0, failFirstCommits: 0 };
  const admitter = createAdmitter(instrument(kv, counts), { tiers: DEFAULT_TIERS, now });
  await admitter.admit(key, est(1, 10n));
  assert.equal(counts.reads, 1);
  for (let i = 2; i <= 5; i++) await admitter.admit(key, est(i, 10n));
  assert.equal(counts.reads, 1, "cached entries, checked by versionstamp at commit");
  assert.equal(counts.commits, 5);
  assert.equal(await getBalance(kv, key.key_id), 1_000_000n - 50n);
  kv.close();
});

Deno.test("near a limit, or after another process wrote, admission reads afresh and stays exact", async () => {
  const path = await Deno.makeTempFile({ suffix: ".kv" });
  const kv1 = await Deno.openKv(path);
  const kv2 = await Deno.openKv(path);
  const key = (await createKey(kv1, { tier: "free", creditsNano: 100n, now })).record;
  const c1: Counts = { commits: 0, reads: 0, failFirstCommits: 0 };
  const a1 = createAdmitter(instrument(kv1, c1), { tiers: DEFAULT_TIERS, now });
  const a2 = createAdmitter(kv2, { tiers: DEFAULT_TIERS, now });
  await a1.admit(key, est(1, 10n)); // read 1, balance 90
  await a2.admit(key, est(2, 10n)); // the other process: balance 80, a1's cache is now stale
  await a1.admit(key, est(3, 10n)); // cached → check fails → fresh read → exact
  assert.ok(c1.reads >= 2, "a lost versionstamp race forces a fresh read");
  assert.equal(await getBalance(kv1, key.key_id), 70n);
  // Balance 70, cost 10: "near" (fewer than 4 more fit below 40) → fresh reads, exact to zero.
  const results = await Promise.allSettled(
    Array.from({ length: 12 }, (_, i) => (i % 2 ? a1 : a2).admit(key, est(10 + i, 10n))),
  );
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 7);
  assert.equal(await getBalance(kv1, key.key_id), 0n);
  kv1.close();
  kv2.close();
  await Deno.remove(path);
});

/** A turn of the event loop: every queued microtask has run. */
const turn = () => new Promise((r) => setTimeout(r, 0));

/** A group committer as admission's lane, telling the test when a write (a hand-back) landed. */
function observedLane(c: GroupCommitter) {
  const waiting: ((ops: KvWrite[]) => void)[] = [];
  const lane: CommitLane = {
    async write(ops) {
      await c.write(ops);
      waiting.splice(0).forEach((w) => w(ops));
    },
    borrow: (m, b) => c.borrow(m, b),
    exclusive: (f) => c.exclusive(f),
    laneFree: () => c.laneFree(),
  };
  return { lane, nextWrite: () => new Promise<KvWrite[]>((r) => waiting.push(r)) };
}

/**
 * A sole-replica admitter with quota leases on, its commits counted. Its
 * monotonic clock is the test's: leases go idle or old only when the test
 * advances it, never because a loaded machine ran the test slowly.
 */
async function leasing(credits: bigint, rpm: number) {
  const kv = await Deno.openKv(":memory:");
  const key = (await createKey(kv, { tier: "pro", creditsNano: credits, rpm, tpm: 1_000_000, now }))
    .record;
  const counts: Counts = { commits: 0, reads: 0, failFirstCommits: 0, inflight: new Set() };
  const committer = new GroupCommitter(kv);
  const observed = observedLane(committer);
  const clock = { t: 0 };
  const admitter = createAdmitter(instrument(kv, counts), {
    tiers: DEFAULT_TIERS,
    now,
    piggyback: observed.lane,
    soleReplica: () => Promise.resolve(true),
    monotonic: () => clock.t,
  });
  /** Waits until no admission work is left: queued batches have committed, renewals merged. */
  const idle = async () => {
    await turn();
    while (counts.inflight!.size > 0) {
      await Promise.allSettled([...counts.inflight!]);
      await turn();
    }
  };
  return { kv, key, counts, committer, admitter, clock, idle, nextWrite: observed.nextWrite };
}

Deno.test("leases: sequential requests far from the limits admit in memory, exactly", async () => {
  const { kv, key, counts, committer, admitter } = await leasing(1_000_000n, 500);
  for (let i = 0; i < 40; i++) await admitter.admit(key, est(i, 10n));
  // One commit: the first request's, which granted a slice of 62 (499 left / 8) that the
  // other 39 were taken from, never running low enough (a quarter) to renew it.
  assert.equal(counts.commits, 1, `40 admissions took ${counts.commits} commits`);
  // The store counts the reserved slice; handing it back leaves exactly what was used.
  await admitter.close();
  await committer.close();
  assert.equal(await getBalance(kv, key.key_id), 1_000_000n - 400n);
  assert.equal((await readRateWindow(kv, key, DEFAULT_TIERS, T0)).requests, 40);
  kv.close();
});

Deno.test("leases: N racing requests against a limit of M still admit exactly M", async () => {
  for (
    const [rpm, credits, n, want] of [[50, 1_000_000n, 200, 50], [1_000, 370n, 100, 37]] as const
  ) {
    const { kv, key, committer, admitter } = await leasing(credits, rpm);
    // Waves, so later requests meet live leases and fold them back near the limit.
    let ok = 0;
    for (let wave = 0; wave < 4; wave++) {
      const rs = await Promise.allSettled(
        Array.from({ length: n / 4 }, (_, i) => admitter.admit(key, est(wave * 100 + i, 10n))),
      );
      ok += rs.filter((r) => r.status === "fulfilled").length;
    }
    assert.equal(ok, want, `rpm ${rpm}, credits ${credits}`);
    await admitter.close();
    await committer.close();
    assert.equal(await getBalance(kv, key.key_id), credits - BigInt(want) * 10n);
    assert.equal((await readRateWindow(kv, key, DEFAULT_TIERS, T0)).requests, want);
    kv.close();
  }
});

Deno.test("leases: an idle lease is handed back on its own; none without sole-replica", async () => {
  const { kv, key, committer, admitter, clock, nextWrite } = await leasing(1_000_000n, 500);
  await admitter.admit(key, est(1, 10n));
  assert.equal(
    await getBalance(kv, key.key_id),
    1_000_000n - 10n - 640n,
    "a slice is reserved (credits: lease_max_requests = 64 requests' worth)",
  );
  // Idle for LEASE_IDLE_MS: the pool's sweep (its own timer) hands the slice back.
  const handedBack = nextWrite();
  clock.t += LEASE_IDLE_MS;
  const ops = await handedBack;
  assert.ok(ops.some((o) => o.op === "sum" && o.value === 640n), "the whole slice's credits");
  assert.equal(await getBalance(kv, key.key_id), 1_000_000n - 10n, "the unused slice came back");
  await admitter.close();
  await committer.close();
  kv.close();

  const kv2 = await Deno.openKv(":memory:");
  const key2 = (await createKey(kv2, { tier: "pro", creditsNano: 1_000_000n, now })).record;
  const c2 = new GroupCommitter(kv2);
  const shared = createAdmitter(kv2, {
    tiers: DEFAULT_TIERS,
    now,
    piggyback: c2,
    soleReplica: () => Promise.resolve(false),
  });
  await shared.admit(key2, est(1, 10n));
  assert.equal(
    await getBalance(kv2, key2.key_id),
    1_000_000n - 10n,
    "no slice with other replicas",
  );
  await shared.close();
  await c2.close();
  kv2.close();
});

Deno.test("leases: a steady stream of requests never waits for the store; renewals stay exact", async () => {
  const { kv, key, counts, committer, admitter, idle } = await leasing(100_000_000n, 6_000);
  const WAITED = Symbol("waited");
  let waited = 0;
  const n = 400;
  for (let i = 0; i < n; i++) {
    // Already resolved (admitted from the lease in memory) wins the race; a queued one does not.
    const p = admitter.admit(key, est(i, 10n));
    if ((await Promise.race([p, Promise.resolve(WAITED)])) === WAITED) waited++;
    await p;
    // Requests keep arriving while a renewal commit is in flight (up to 7 of them); every
    // 8th lets the store answer. A renewal is asked with a quarter of the slice (16) left,
    // so it lands before the lease runs dry however slow the store is.
    if (i % 8 === 7) await idle();
  }
  // Only the first request went to the store; slices of at most 64 were renewed ahead of need.
  assert.equal(waited, 1, `${waited} of ${n} requests waited for an admission commit`);
  assert.ok(counts.commits >= n / 64, `${counts.commits} admission commits for ${n} requests`);
  await admitter.close();
  await committer.close();
  assert.equal(await getBalance(kv, key.key_id), 100_000_000n - BigInt(n) * 10n);
  assert.equal((await readRateWindow(kv, key, DEFAULT_TIERS, T0)).requests, n);
  kv.close();
});
