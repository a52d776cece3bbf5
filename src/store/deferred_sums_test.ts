import assert from "node:assert/strict";
import {
  deferredConsistent,
  DeferredSums,
  foldDeferred,
  keyText,
  parseDeferredRow,
  readDeferred,
  readWithDeferred,
} from "./deferred_sums.ts";
import { applyWrites, type KvWrite } from "./kv_writes.ts";
import { GroupCommitter } from "./group_commit.ts";

const PREFIX: Deno.KvKey = ["pending"];
const defer = (key: Deno.KvKey, value: bigint): KvWrite => ({ op: "defer", key, value });

async function commit(kv: Deno.Kv, writes: KvWrite[]): Promise<void> {
  const a = kv.atomic();
  applyWrites(a, writes);
  assert.ok((await a.commit()).ok);
}

async function counter(kv: Deno.Kv, key: Deno.KvKey): Promise<bigint> {
  const v = (await kv.get(key)).value;
  return v instanceof Deno.KvU64 ? v.value : 0n;
}

function book(clock: { t: number }, over: Partial<{ flushMs: number; maxEntries: number }> = {}) {
  return new DeferredSums({
    row: [...PREFIX, "me"],
    flushMs: over.flushMs ?? 1000,
    maxEntries: over.maxEntries ?? 8,
    now: () => clock.t,
  });
}

Deno.test("deferred sums: deltas accumulate in the row; a plan not done leaves it as it was", () => {
  const clock = { t: 0 };
  const d = book(clock);
  const p1 = d.plan([defer(["u", "k", "req"], 1n), defer(["u", "k", "tok"], 5n)], 100);
  assert.equal(p1.writes.length, 1);
  assert.deepEqual(p1.writes[0], {
    op: "set",
    key: ["pending", "me"],
    value: { epoch: 0, entries: [[["u", "k", "req"], 1n], [["u", "k", "tok"], 5n]] },
  });
  p1.done();
  // A failed commit: planned, never done.
  d.plan([defer(["u", "k", "req"], 100n)], 100);
  const p2 = d.plan([defer(["u", "k", "req"], 1n)], 100);
  const row = parseDeferredRow((p2.writes[0] as { value: unknown }).value);
  assert.deepEqual(row.entries, [[["u", "k", "req"], 2n], [["u", "k", "tok"], 5n]]);
  // Nothing deferred (or only zeros): nothing to write.
  assert.deepEqual(d.plan([defer(["u", "k", "req"], 0n)], 100).writes, []);
  assert.deepEqual(d.plan([{ op: "sum", key: ["x"], value: 1n }], 100).writes, []);
});

Deno.test("deferred sums: old deltas, too many, or a flush asked are applied as sums with the row emptied", () => {
  const clock = { t: 0 };
  const d = book(clock, { flushMs: 1000, maxEntries: 2 });
  d.plan([defer(["a"], 3n)], 100).done();
  clock.t = 999;
  assert.equal(d.due, false);
  assert.equal(d.plan([defer(["a"], 1n)], 100).writes.length, 1);
  clock.t = 1000;
  assert.equal(d.due, true);
  const flush = d.plan([defer(["b"], 2n)], 100);
  assert.deepEqual(flush.writes, [
    { op: "sum", key: ["a"], value: 3n },
    { op: "sum", key: ["b"], value: 2n },
    { op: "set", key: ["pending", "me"], value: { epoch: 1, entries: [] } },
  ]);
  // Without room for the sums, the row is written instead.
  const noRoom = d.plan([defer(["b"], 2n)], 2);
  assert.equal(noRoom.writes.length, 1);
  assert.equal(noRoom.writes[0].op, "set");
  flush.done();
  assert.equal(d.pending, false);
  // Three counters with maxEntries 2: applied at once.
  const many = d.plan([defer(["a"], 1n), defer(["b"], 1n), defer(["c"], 1n)], 100);
  assert.equal(many.writes.filter((w) => w.op === "sum").length, 3);
  many.done();
  // Asked to flush with nothing pending: nothing to write.
  assert.deepEqual(d.plan([], 100, true).writes, []);
  // Closing deletes the row the earlier commits wrote.
  d.plan([defer(["a"], 4n)], 100).done();
  assert.deepEqual(d.closing().writes, [
    { op: "sum", key: ["a"], value: 4n },
    { op: "delete", key: ["pending", "me"] },
  ]);
  assert.deepEqual(book(clock).closing().writes, [], "a row never written is not deleted");
});

Deno.test("deferred sums: key texts tell part types apart", () => {
  const texts = new Set(
    [["1"], [1], [1n], [true], [new Uint8Array([1])], ["a", "b"], ["ab"], ["a,b"], [-0], [0]]
      .map((k) => keyText(k as Deno.KvKey)),
  );
  assert.equal(texts.size, 10);
});

Deno.test("deferred sums: readers add the rows to the counters, and a flush between reads is not counted twice", async () => {
  const kv = await Deno.openKv(":memory:");
  await commit(kv, [{ op: "sum", key: ["c"], value: 10n }]);
  const clock = { t: 0 };
  const d = book(clock);
  const p = d.plan([defer(["c"], 5n)], 100);
  await commit(kv, p.writes);
  p.done();
  const read = () =>
    readWithDeferred(kv, PREFIX, () => counter(kv, ["c"])).then(({ shared, deferred }) =>
      shared + deferred.of(["c"])
    );
  assert.equal(await read(), 15n);
  // A flush lands right after the rows were read the first time: the counter already
  // holds the 5 while the first rows still did.
  let flushed = false;
  const r = await readWithDeferred(kv, PREFIX, async () => {
    if (!flushed) {
      flushed = true;
      const f = d.plan([], 100, true);
      await commit(kv, f.writes);
      f.done();
    }
    return await counter(kv, ["c"]);
  });
  assert.equal(r.shared + r.deferred.of(["c"]), 15n);
  assert.equal(await counter(kv, ["c"]), 15n);
  kv.close();
});

Deno.test("deferred sums: snapshots agree only when no row was flushed, deleted, or appeared already flushed", () => {
  const snap = (rows: [string, number][]) => ({
    rows: new Map(rows.map(([k, epoch]) => [k, { epoch, entries: [] }])),
  });
  assert.ok(deferredConsistent(snap([["a", 1]]), snap([["a", 1], ["b", 0]])));
  assert.ok(!deferredConsistent(snap([["a", 1]]), snap([["a", 2]])));
  assert.ok(!deferredConsistent(snap([["a", 1]]), snap([])));
  assert.ok(!deferredConsistent(snap([]), snap([["b", 1]])));
});

Deno.test("deferred sums: a dead replica's row is applied once and deleted", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = { t: 0 };
  const d = book(clock);
  const p = d.plan([defer(["c"], 7n), defer(["e"], 2n)], 100);
  await commit(kv, p.writes);
  const [a, b] = await Promise.all([
    foldDeferred(kv, [...PREFIX, "me"]),
    foldDeferred(kv, [...PREFIX, "me"]),
  ]);
  assert.equal(a + b, 2, "two counters applied, by one of the two");
  assert.equal(await counter(kv, ["c"]), 7n);
  assert.equal(await counter(kv, ["e"]), 2n);
  assert.equal((await readDeferred(kv, PREFIX)).rows.size, 0);
  assert.equal(await foldDeferred(kv, [...PREFIX, "me"]), 0);
  kv.close();
});

Deno.test("group committer with deferred sums: one row per commit, applied after flushMs, by the idle flush, and on close", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = { t: 0 };
  const d = book(clock, { flushMs: 40 });
  const gc = new GroupCommitter(kv, { deferred: d });
  await Promise.all([
    gc.write([{ op: "set", key: ["r", 1], value: 1 }, defer(["u", "req"], 1n)]),
    gc.write([{ op: "set", key: ["r", 2], value: 2 }, defer(["u", "req"], 1n)]),
  ]);
  assert.equal(await counter(kv, ["u", "req"]), 0n, "not applied yet");
  let rows = await readDeferred(kv, PREFIX);
  assert.deepEqual([...rows.rows.values()], [{ epoch: 0, entries: [[["u", "req"], 2n]] }]);
  // Old enough: the next commit applies it.
  clock.t = 40;
  await gc.write([defer(["u", "req"], 1n)]);
  assert.equal(await counter(kv, ["u", "req"]), 3n);
  rows = await readDeferred(kv, PREFIX);
  assert.deepEqual([...rows.rows.values()], [{ epoch: 1, entries: [] }]);
  // Then nothing commits: the idle flush applies what waits (real timer, fake clock).
  await gc.write([defer(["u", "req"], 4n)]);
  clock.t = 200;
  for (let i = 0; i < 100 && (await counter(kv, ["u", "req"])) !== 7n; i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(await counter(kv, ["u", "req"]), 7n);
  // Closing applies the rest and deletes the row.
  await gc.write([defer(["u", "req"], 1n)]);
  await gc.close();
  assert.equal(await counter(kv, ["u", "req"]), 8n);
  assert.equal((await readDeferred(kv, PREFIX)).rows.size, 0);
  kv.close();
});

Deno.test("group committer with deferred sums: a failed commit leaves the row as it was; borrowed writes apply theirs at once", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = { t: 0 };
  const d = book(clock);
  const fence: Deno.KvKey = ["fence"];
  const gc = new GroupCommitter(kv, {
    deferred: d,
    fence: { key: fence, error: () => new Error("fenced") },
  });
  await gc.write([defer(["u"], 2n)]);
  await kv.set(fence, 1);
  await assert.rejects(gc.write([defer(["u"], 5n)]), /fenced/);
  await kv.delete(fence);
  await gc.write([defer(["u"], 1n)]);
  const rows = await readDeferred(kv, PREFIX);
  assert.deepEqual([...rows.rows.values()][0].entries, [[["u"], 3n]]);
  // Queued, then lent to another commit (an admission's): plain sums there.
  const other = gc.write([{ op: "set", key: ["x"], value: 1 }]);
  const queued = gc.write([defer(["u"], 10n)]);
  const lent = gc.borrow(10, 10_000);
  assert.ok(lent !== null);
  assert.deepEqual(lent.ops, [
    { op: "set", key: ["x"], value: 1 },
    { op: "sum", key: ["u"], value: 10n },
  ]);
  const a = kv.atomic();
  applyWrites(a, lent.ops);
  assert.ok((await a.commit()).ok);
  lent.settle(true);
  await Promise.all([other, queued]);
  assert.equal(await counter(kv, ["u"]), 10n);
  await gc.close();
  assert.equal(await counter(kv, ["u"]), 13n);
  kv.close();
});

Deno.test("deferred sums: with too many counters for one row and no room to flush, a commit's deltas are plain sums", () => {
  const clock = { t: 0 };
  const d = book(clock, { maxEntries: 2 });
  d.plan([defer(["a"], 1n)], 100).done();
  // Five counters (over 2 × 2) and room for only four more mutations: no flush, no big row.
  const many = [defer(["b"], 1n), defer(["c"], 1n), defer(["d"], 1n), defer(["e"], 1n)];
  const p = d.plan(many, 4);
  assert.deepEqual(p.writes, many.map((w) => ({ ...w, op: "sum" })));
  p.done();
  // The row still holds what it held.
  const next = d.plan([defer(["a"], 1n)], 1);
  assert.deepEqual(parseDeferredRow((next.writes[0] as { value: unknown }).value).entries, [
    [["a"], 2n],
  ]);
});

Deno.test("group committer with deferred sums: a batch of many keys commits, and every counter comes out exact", async () => {
  const kv = await Deno.openKv(":memory:");
  const d = book({ t: 0 }, { maxEntries: 64 });
  const gc = new GroupCommitter(kv, { deferred: d });
  // 400 writers, each a receipt-like row and 11 counters of its own key, in one burst.
  await Promise.all(Array.from({ length: 400 }, (_, i) =>
    gc.write([
      { op: "set", key: ["r", i], value: new Uint8Array(200) },
      ...Array.from({ length: 11 }, (_, f) => defer(["usage", `key-${i}`, `f${f}`], BigInt(i + 1))),
    ])));
  const row = (await kv.get([...PREFIX, "me"])).value;
  if (row !== null) assert.ok(parseDeferredRow(row).entries.length <= 128);
  await gc.close();
  for (const i of [0, 57, 399]) {
    for (const f of [0, 10]) {
      assert.equal(await counter(kv, ["usage", `key-${i}`, `f${f}`]), BigInt(i + 1));
    }
  }
  assert.equal((await readDeferred(kv, PREFIX)).rows.size, 0);
  kv.close();
});

Deno.test("deferred sums: random commits, flushes, reads and a fold never count a delta twice or lose one", async () => {
  const kv = await Deno.openKv(":memory:");
  // Seeded (mulberry32): the same sequence on every run.
  let seed = 0x5eed;
  const rand = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const clock = { t: 0 };
  const replica = (name: string) => {
    const fence: Deno.KvKey = ["fence", name];
    const d = new DeferredSums({
      row: [...PREFIX, name],
      flushMs: 50,
      maxEntries: 6,
      now: () => clock.t,
    });
    return {
      name,
      fence,
      gc: new GroupCommitter(kv, {
        deferred: d,
        fence: { key: fence, error: () => new Error("fenced") },
      }),
    };
  };
  const replicas = [replica("a"), replica("b")];
  const keys: Deno.KvKey[] = Array.from({ length: 10 }, (_, i) => ["c", `k${i}`]);
  const expected = new Map<string, bigint>();
  const read = async () => {
    const { shared, deferred } = await readWithDeferred(
      kv,
      PREFIX,
      () => Promise.all(keys.map((k) => counter(kv, k))),
    );
    return keys.map((k, i) => shared[i] + deferred.of(k));
  };
  const want = () => keys.map((k) => expected.get(keyText(k)) ?? 0n);
  let folded = false;
  for (let step = 0; step < 400; step++) {
    clock.t += Math.floor(rand() * 20);
    const r = replicas[Math.floor(rand() * 2)];
    if (r.name === "b" && folded) continue;
    const n = 1 + Math.floor(rand() * 4);
    const writes: KvWrite[] = [];
    for (let i = 0; i < n; i++) {
      const k = keys[Math.floor(rand() * keys.length)];
      const v = BigInt(1 + Math.floor(rand() * 9));
      writes.push(defer(k, v));
    }
    // Some writers at once (one commit), some alone.
    const burst = rand() < 0.3 ? [writes.slice(0, 2), writes.slice(2)] : [writes];
    await Promise.all(burst.map((w) => r.gc.write(w)));
    for (const w of writes) {
      if (w.op === "defer") {
        expected.set(keyText(w.key), (expected.get(keyText(w.key)) ?? 0n) + w.value);
      }
    }
    if (rand() < 0.2) assert.deepEqual(await read(), want(), `step ${step}`);
    if (step === 250) {
      // Replica b "dies": fenced, then its row is applied once by someone else.
      await kv.set(replicas[1].fence, 1);
      await foldDeferred(kv, [...PREFIX, "b"]);
      folded = true;
      assert.deepEqual(await read(), want(), "after the fold");
    }
  }
  // A reader racing a flush still agrees.
  const racing = read();
  clock.t += 100;
  await replicas[0].gc.write([defer(keys[0], 1n)]);
  expected.set(keyText(keys[0]), (expected.get(keyText(keys[0])) ?? 0n) + 1n);
  const seen = await racing;
  const after = await read();
  assert.ok(
    seen[0] === after[0] || seen[0] === after[0] - 1n,
    "the racing read saw before or after",
  );
  assert.deepEqual(after, want());
  await replicas[0].gc.close();
  await replicas[1].gc.close(); // fenced: its close fails quietly, nothing left to apply
  assert.deepEqual(
    await Promise.all(keys.map((k) => counter(kv, k))),
    want(),
    "the counters alone",
  );
  assert.equal((await readDeferred(kv, PREFIX)).rows.size, 0);
  kv.close();
});

Deno.test("group committer with deferred sums: closing while an idle flush is in flight applies each delta once", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = { t: 0 };
  let slow = false;
  let flushing: (() => void) | null = null;
  const started = new Promise<void>((r) => (flushing = r));
  // Commits take 80 ms once `slow` is set: the idle flush is still in flight when close comes.
  const source = {
    atomic() {
      const a = kv.atomic();
      const commit = a.commit.bind(a);
      a.commit = async () => {
        if (slow) {
          flushing?.();
          await new Promise((r) => setTimeout(r, 80));
        }
        return commit();
      };
      return a;
    },
  };
  const d = book(clock, { flushMs: 20 });
  const gc = new GroupCommitter(source, { deferred: d });
  await gc.write([defer(["u"], 5n)]);
  slow = true;
  clock.t = 1_000;
  // The idle flush's timer does not keep the process alive; this does, meanwhile.
  const alive = setTimeout(() => {}, 5_000);
  await started; // the idle flush's commit began
  await gc.close();
  clearTimeout(alive);
  assert.equal(await counter(kv, ["u"]), 5n);
  assert.equal((await readDeferred(kv, PREFIX)).rows.size, 0);
  kv.close();
});
