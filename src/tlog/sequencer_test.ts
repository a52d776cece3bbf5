import assert from "node:assert/strict";
import { framed, GroupCommitter } from "../store/mod.ts";
import { createSequencer } from "./sequencer.ts";
import { type Head, HEAD_KEY, PENDING_PREFIX } from "./tiles.ts";

const entry = (n: number) => new TextEncoder().encode(`{"kind":"session","session_id":"s${n}"}`);

/**
 * A sequencer on the committer's lane, with one pending entry and one receipt
 * write queued behind a held lane: the append goes first when the lane frees.
 */
async function setUp(fenced: boolean) {
  const kv = await Deno.openKv(":memory:");
  const fence: Deno.KvKey = ["fence", "r1"];
  if (fenced) await kv.set(fence, true);
  let ownCommits = 0;
  const committer = new GroupCommitter(kv, {
    onCommit: () => ownCommits++,
    fence: { key: fence, error: () => new Error("fenced") },
  });
  const seq = createSequencer({
    kv,
    origin: "example.test/log",
    sign: () => "— example.test/log AAAA",
    lane: {
      exclusive: (f) => committer.exclusive(f),
      borrow: (m, b) => committer.borrow(m, b),
      fence,
    },
  });
  await kv.set([...PENDING_PREFIX, 1, "a0"], framed([entry(1)]));
  let release!: () => void;
  const held = committer.exclusive(() => new Promise<void>((r) => release = r));
  const written = committer.write([{ op: "set", key: ["receipt", "r-1"], value: "row" }]);
  const outcome = written.then(() => "ok", (e: Error) => e.message);
  seq.kick();
  await new Promise((r) => setTimeout(r, 50)); // the append waits for the lane
  release();
  await held;
  const result = await outcome;
  await seq.drain();
  await committer.close();
  const head = (await kv.get<Head>(HEAD_KEY)).value;
  const row = (await kv.get(["receipt", "r-1"])).value;
  await seq.close();
  kv.close();
  return { result, ownCommits, size: head?.size, row };
}

Deno.test("an append carries the receipt writes queued meanwhile: one commit, not two", async () => {
  const r = await setUp(false);
  assert.equal(r.result, "ok");
  assert.equal(r.size, 1);
  assert.equal(r.row, "row");
  assert.equal(r.ownCommits, 0, "the write rode the append's commit");
});

Deno.test("a fenced replica's append is made alone; its carried writes fail on their own commit", async () => {
  const r = await setUp(true);
  assert.equal(r.size, 1, "the log still appends");
  assert.equal(r.result, "fenced");
  assert.equal(r.row, null);
});

Deno.test("caughtUpSince: true only for times at or before the start of a pass that took every pending row", async () => {
  const kv = await Deno.openKv(":memory:");
  let clock = 1_000;
  const seq = createSequencer({
    kv,
    now: () => clock,
    origin: "example.test/log",
    sign: () => "— example.test/log AAAA",
  });
  try {
    assert.equal(seq.caughtUpSince(0), false, "no pass yet");
    // Two batches' worth: the pass that ends caught up is the last one, listed at its own time.
    for (let i = 0; i < 450; i++) await kv.set([...PENDING_PREFIX, i, `a${i}`], framed([entry(i)]));
    seq.kick();
    await seq.drain();
    assert.equal((await kv.get<Head>(HEAD_KEY)).value?.size, 450);
    assert.equal(seq.caughtUpSince(1_000), true);
    assert.equal(seq.caughtUpSince(1_001), false);
    clock = 2_000;
    seq.kick(); // nothing pending: an empty pass still saw everything
    await seq.drain();
    assert.equal(seq.caughtUpSince(2_000), true);
  } finally {
    await seq.close();
    kv.close();
  }
});
