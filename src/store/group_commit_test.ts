import assert from "node:assert/strict";
import { GroupCommitter, type KvAtomicSource } from "./group_commit.ts";
import { backoffMs, isTransientKvError } from "./transient.ts";

interface Hooks {
  commits: number;
  mutationsPerCommit: number[];
  /** Runs before each real commit; may throw to simulate errors. */
  before?: (n: number) => void | Promise<void>;
}

async function u64At(kv: Deno.Kv, key: Deno.KvKey): Promise<bigint | null> {
  const v = (await kv.get(key)).value;
  return v instanceof Deno.KvU64 ? v.value : null;
}

/** Wraps a real KV so tests can count commits and inject failures. */
function instrument(kv: Deno.Kv, hooks: Hooks): KvAtomicSource {
  return {
    atomic() {
      const a = kv.atomic();
      let mutations = 0;
      const set = a.set.bind(a), sum = a.sum.bind(a), del = a.delete.bind(a);
      a.set = (k, v, o) => (mutations++, set(k, v, o));
      a.sum = (k, n) => (mutations++, sum(k, n));
      a.delete = (k) => (mutations++, del(k));
      const commit = a.commit.bind(a);
      a.commit = async () => {
        hooks.commits++;
        await hooks.before?.(hooks.commits);
        hooks.mutationsPerCommit.push(mutations);
        return commit();
      };
      return a;
    },
  };
}

Deno.test("group committer groups concurrent writes into few commits", async () => {
  const kv = await Deno.openKv(":memory:");
  const hooks: Hooks = { commits: 0, mutationsPerCommit: [] };
  const gc = new GroupCommitter(instrument(kv, hooks));
  const first = gc.write([{ op: "set", key: ["a", -1], value: "x" }]);
  // These arrive while the first commit is in flight (after a macrotask).
  await new Promise((r) => setTimeout(r, 0));
  const rest = Array.from(
    { length: 200 },
    (_, i) =>
      gc.write([{ op: "set", key: ["a", i], value: i }, { op: "sum", key: ["n"], value: 1n }]),
  );
  await Promise.all([first, ...rest]);
  assert.ok(hooks.commits <= 3, `expected few commits, got ${hooks.commits}`);
  // 201 sets, and the 200 sums on ["n"] merged into one per commit that carries them.
  const mutations = hooks.mutationsPerCommit.reduce((a, b) => a + b, 0);
  assert.ok(mutations >= 202 && mutations <= 201 + hooks.commits, `${mutations} mutations`);
  assert.equal(await u64At(kv, ["n"]), 200n);
  assert.equal((await kv.get(["a", 199])).value, 199);
  kv.close();
});

Deno.test("write resolves only after its commit is durable", async () => {
  const kv = await Deno.openKv(":memory:");
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const hooks: Hooks = { commits: 0, mutationsPerCommit: [], before: () => gate };
  const gc = new GroupCommitter(instrument(kv, hooks));
  let done = false;
  const p = gc.write([{ op: "set", key: ["k"], value: 1 }]).then(() => (done = true));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(done, false);
  assert.equal((await kv.get(["k"])).value, null);
  release();
  await p;
  assert.equal((await kv.get(["k"])).value, 1);
  kv.close();
});

Deno.test("big batches are split within the mutation and size limits", async () => {
  const kv = await Deno.openKv(":memory:");
  const hooks: Hooks = { commits: 0, mutationsPerCommit: [] };
  const gc = new GroupCommitter(instrument(kv, hooks), { maxBatchMutations: 10 });
  await Promise.all(
    Array.from({ length: 35 }, (_, i) => gc.write([{ op: "set", key: ["m", i], value: i }])),
  );
  assert.deepEqual(hooks.mutationsPerCommit, [10, 10, 10, 5]);

  // 20 values of 60 KB (1.2 MB) exceed one commit's 800 KB total size.
  const hooks2: Hooks = { commits: 0, mutationsPerCommit: [] };
  const gc2 = new GroupCommitter(instrument(kv, hooks2));
  const blob = new Uint8Array(60_000).fill(7);
  await Promise.all(
    Array.from({ length: 20 }, (_, i) => gc2.write([{ op: "set", key: ["blob", i], value: blob }])),
  );
  assert.ok(hooks2.commits >= 2, `expected a split, got ${hooks2.commits} commit(s)`);
  assert.equal(hooks2.mutationsPerCommit.reduce((a, b) => a + b, 0), 20);
  const back = await kv.get<Uint8Array>(["blob", 19]);
  assert.equal(back.value?.byteLength, 60_000);

  // One writer larger than a commit is spread over several commits.
  const hooks3: Hooks = { commits: 0, mutationsPerCommit: [] };
  const gc3 = new GroupCommitter(instrument(kv, hooks3), { maxBatchMutations: 100 });
  await gc3.write(Array.from({ length: 250 }, (_, i) => ({ op: "sum", key: ["w", i], value: 2n })));
  assert.deepEqual(hooks3.mutationsPerCommit, [100, 100, 50]);
  assert.equal(await u64At(kv, ["w", 249]), 2n);
  kv.close();
});

Deno.test("a simulated 'database is locked' is retried with backoff", async () => {
  const kv = await Deno.openKv(":memory:");
  const slept: number[] = [];
  const hooks: Hooks = {
    commits: 0,
    mutationsPerCommit: [],
    before: (n) => {
      if (n <= 2) throw new TypeError("database is locked");
    },
  };
  const gc = new GroupCommitter(instrument(kv, hooks), {
    random: () => 0.5,
    sleep: (ms) => (slept.push(ms), Promise.resolve()),
  });
  await gc.write([{ op: "set", key: ["locked"], value: "ok" }]);
  assert.equal(hooks.commits, 3);
  assert.deepEqual(slept, [backoffMs(1, () => 0.5), backoffMs(2, () => 0.5)]);
  assert.equal((await kv.get(["locked"])).value, "ok");
  assert.ok(isTransientKvError(new TypeError("database is locked")));
  assert.ok(!isTransientKvError(new TypeError("Value too large")));
  kv.close();
});

Deno.test("a permanent failure rejects only the failing writer", async () => {
  const kv = await Deno.openKv(":memory:");
  await kv.set(["not_u64"], "text");
  const errors: unknown[] = [];
  const gc = new GroupCommitter(kv, { onError: (e) => errors.push(e) });
  const good1 = gc.write([{ op: "set", key: ["g", 1], value: 1 }]);
  const bad = gc.write([{ op: "sum", key: ["not_u64"], value: 1n }]);
  const good2 = gc.write([{ op: "set", key: ["g", 2], value: 2 }]);
  const results = await Promise.allSettled([good1, bad, good2]);
  assert.deepEqual(results.map((r) => r.status), ["fulfilled", "rejected", "fulfilled"]);
  assert.equal(errors.length, 1);
  assert.equal((await kv.get(["g", 2])).value, 2);
  kv.close();
});

Deno.test("negative sums subtract by wrapping; bad ops are rejected up front", async () => {
  const kv = await Deno.openKv(":memory:");
  const gc = new GroupCommitter(kv);
  await gc.write([{ op: "sum", key: ["bal"], value: 10n }]);
  await gc.write([{ op: "sum", key: ["bal"], value: -3n }]);
  assert.equal(await u64At(kv, ["bal"]), 7n);
  await gc.write([{ op: "delete", key: ["bal"] }]);
  assert.equal((await kv.get(["bal"])).value, null);
  await assert.rejects(gc.write([{ op: "set", key: ["big"], value: new Uint8Array(70_000) }]));
  await assert.rejects(gc.write([{ op: "sum", key: ["x"], value: 1n << 64n }]));
  await assert.rejects(gc.write([{ op: "set", key: ["e"], value: 1, expireIn: -5 }]));
  kv.close();
});

Deno.test("flush waits for queued writes; close refuses new ones", async () => {
  const kv = await Deno.openKv(":memory:");
  const gc = new GroupCommitter(kv);
  let n = 0;
  for (let i = 0; i < 10; i++) {
    void gc.write([{ op: "set", key: ["f", i], value: i }]).then(() => n++);
  }
  await gc.flush();
  await Promise.resolve();
  assert.equal(n, 10);
  await gc.close();
  await assert.rejects(gc.write([{ op: "set", key: ["late"], value: 1 }]), /closed/);
  kv.close();
});

Deno.test("two KV handles on one file: concurrent sums land exactly", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/kv.sqlite`;
  const kv1 = await Deno.openKv(path);
  const kv2 = await Deno.openKv(path);
  try {
    const gcs = [new GroupCommitter(kv1), new GroupCommitter(kv2)];
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 300; i++) {
      for (const gc of gcs) writes.push(gc.write([{ op: "sum", key: ["total"], value: 1n }]));
      if (i % 30 === 0) await new Promise((r) => setTimeout(r, 0));
    }
    await Promise.all(writes);
    assert.equal(await u64At(kv1, ["total"]), 600n);
  } finally {
    kv1.close();
    kv2.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sums on one key in one commit are merged; sets and deletes keep their order", async () => {
  const { coalesceSums } = await import("./group_commit.ts");
  const ops = coalesceSums([
    { op: "sum", key: ["u", "a"], value: 2n },
    { op: "set", key: ["r", 1], value: "x" },
    { op: "sum", key: ["u", "a"], value: 3n },
    { op: "sum", key: ["u", "b"], value: -1n },
    { op: "sum", key: ["s", 1], value: 1n },
    { op: "set", key: ["s", 1], value: 5 },
    { op: "sum", key: ["u", "b"], value: 4n },
  ]);
  assert.deepEqual(ops, [
    { op: "sum", key: ["u", "a"], value: 5n },
    { op: "set", key: ["r", 1], value: "x" },
    { op: "sum", key: ["u", "b"], value: 3n },
    { op: "sum", key: ["s", 1], value: 1n },
    { op: "set", key: ["s", 1], value: 5 },
  ]);
  // Through a real store: 50 concurrent writers' sums land exactly.
  const kv = await Deno.openKv(":memory:");
  const c = new GroupCommitter(kv);
  await Promise.all(
    Array.from({ length: 50 }, (_, i) => c.write([{ op: "sum", key: ["n"], value: BigInt(i) }])),
  );
  assert.equal((await kv.get<Deno.KvU64>(["n"])).value?.value, 1225n);
  await c.close();
  kv.close();
});

Deno.test("borrowed writers resolve with the commit that carried them, or go back to the queue", async () => {
  const kv = await Deno.openKv(":memory:");
  const c = new GroupCommitter(kv);
  // Hold the committer busy so the next writers queue up.
  const first = c.write([{ op: "set", key: ["first"], value: 1 }]);
  await Promise.resolve(); // the drain takes `first` and its commit is in flight
  const a = c.write([{ op: "set", key: ["a"], value: 1 }, { op: "sum", key: ["n"], value: 2n }]);
  const b = c.write([{ op: "sum", key: ["n"], value: 3n }]);
  const lent = c.borrow(100, 100_000);
  assert.ok(lent);
  assert.deepEqual(lent.ops.map((o) => o.op), ["set", "sum"], "the two sums merged");
  let flushed = false;
  const f = c.flush().then(() => (flushed = true));
  await first;
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(flushed, false, "flush waits for lent writers");
  // The borrowing commit fails: they go back and the committer commits them itself.
  lent.settle(false);
  await Promise.all([a, b, f]);
  assert.equal((await kv.get<Deno.KvU64>(["n"])).value?.value, 5n);
  // A successful borrowing commit resolves its writers.
  const d = c.write([{ op: "set", key: ["d"], value: 4 }]);
  const lent2 = c.borrow(100, 100_000);
  if (lent2) {
    const atomic = kv.atomic();
    (await import("./group_commit.ts")).applyWrites(atomic, lent2.ops);
    lent2.settle((await atomic.commit()).ok);
  }
  await d;
  assert.equal((await kv.get(["d"])).value, 4);
  await c.close();
  kv.close();
});

Deno.test("exclusive sections take turns with the committer's commits and carry its queue", async () => {
  const kv = await Deno.openKv(":memory:");
  const hooks: Hooks = { commits: 0, mutationsPerCommit: [] };
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  hooks.before = (n) => n === 1 ? gate : undefined;
  const c = new GroupCommitter(instrument(kv, hooks));
  const first = c.write([{ op: "set", key: ["first"], value: 1 }]);
  await Promise.resolve(); // `first` is now in flight, held at the gate
  const order: string[] = [] as string[];
  const queued = c.write([{ op: "set", key: ["queued"], value: 2 }]);
  const section = c.exclusive(async () => {
    order.push("exclusive starts");
    const lent = c.borrow(100, 100_000);
    assert.ok(lent, "the writer queued behind the in-flight commit can be borrowed");
    const atomic = kv.atomic();
    (await import("./group_commit.ts")).applyWrites(atomic, lent.ops);
    atomic.set(["mine"], 3);
    lent.settle((await atomic.commit()).ok);
    order.push("exclusive ends");
  });
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(order.length, 0, "the section waits for the in-flight commit");
  release();
  await first;
  order.push("first committed");
  await Promise.all([section, queued]);
  assert.equal((await kv.get(["queued"])).value, 2);
  assert.equal((await kv.get(["mine"])).value, 3);
  assert.equal(hooks.commits, 1, "the queued writer rode the section's commit");
  // While a section holds the lane, new writes wait for it.
  let inside!: () => void;
  const hold = new Promise<void>((r) => (inside = r));
  const s2 = c.exclusive(() => hold);
  const w = c.write([{ op: "set", key: ["after"], value: 4 }]);
  await new Promise((r) => setTimeout(r, 5));
  assert.equal((await kv.get(["after"])).value, null, "no commit while the lane is held");
  inside();
  await Promise.all([s2, w]);
  assert.equal((await kv.get(["after"])).value, 4);
  await c.close();
  kv.close();
});
