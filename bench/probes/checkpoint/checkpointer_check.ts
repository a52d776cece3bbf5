import assert from "node:assert/strict";
import { CHECKPOINT_WORKER_URL, isLocalStorePath, startCheckpointer } from "./checkpointer.ts";
import { GroupCommitter } from "../../../src/store/group_commit.ts";

const newWorker = () => new Worker(CHECKPOINT_WORKER_URL, { type: "module" });

/** Frames in the WAL (`mxFrame` of the WAL index header). */
function walFrames(path: string): number {
  const f = Deno.openSync(`${path}-shm`, { read: true });
  const b = new Uint8Array(20);
  f.readSync(b);
  f.close();
  return new DataView(b.buffer).getUint32(16, true);
}

Deno.test("checkpointer: the thread checkpoints, so no commit reaches SQLite's 1,000-frame auto-checkpoint", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/store.kv`;
  const kv = await Deno.openKv(path);
  const cp = await startCheckpointer(newWorker(), path, { intervalMs: 1, frames: 100 });
  try {
    const committer = new GroupCommitter(kv);
    let longest = 0;
    // ~1.4 KB rows one commit at a time, as a lightly loaded gateway writes
    // receipts: without the thread this WAL passes 1,000 frames many times.
    for (let i = 0; i < 600; i++) {
      await committer.write([{ op: "set", key: ["r", i], value: `${i}:${"x".repeat(1400)}` }]);
      longest = Math.max(longest, walFrames(path));
      // Let the thread run between commits, as request gaps do.
      if (i % 10 === 0) await new Promise((r) => setTimeout(r, 2));
    }
    const st = await cp.stats();
    assert.ok(st.runs > 0 && st.framesCopied > 0, JSON.stringify(st));
    assert.ok(longest < 1000, `WAL reached ${longest} frames`);
    assert.ok(st.maxWalFrames < 1000, JSON.stringify(st));
    assert.equal(st.errors, 0);
  } finally {
    await cp.stop();
    await cp.stop(); // idempotent
    kv.close();
  }
  // Everything committed is there after a reopen.
  const again = await Deno.openKv(path);
  try {
    let n = 0;
    for await (const e of again.list<string>({ prefix: ["r"] })) {
      assert.ok(e.value.startsWith(`${String(e.key[1])}:`));
      n++;
    }
    assert.equal(n, 600);
  } finally {
    again.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("checkpointer: a store it cannot open is refused at start, without hanging", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(
      () => startCheckpointer(newWorker(), `${dir}/missing/dir/store.kv`),
      /did not start/,
    );
    const w = newWorker();
    assert.throws(() => startCheckpointer(w, `${dir}/x.kv`, { frames: 1000 }), RangeError);
    w.terminate();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("checkpointer: only local store files get a thread", () => {
  assert.equal(isLocalStorePath("/var/lib/gateway/store.kv"), true);
  assert.equal(isLocalStorePath("store.kv"), true);
  assert.equal(isLocalStorePath(":memory:"), false);
  assert.equal(isLocalStorePath("https://kv.example.com/db"), false);
  assert.equal(isLocalStorePath("http://127.0.0.1:4512"), false);
  assert.equal(isLocalStorePath(""), false);
  assert.equal(isLocalStorePath(undefined), false);
});
