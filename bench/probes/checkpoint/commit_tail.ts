/**
 * What a receipt's durable commit costs at a fixed rate, and how often a WAL
 * checkpoint lands inside one: receipts of the gateway's shape (plus a usage
 * sum each) written through the `GroupCommitter` at `rate` per second for
 * `seconds`, open loop, each write timed from `write()` to durable. Run once
 * with SQLite's own auto-checkpoint (inside commits) and once with the
 * checkpoint thread (`bench/probes/checkpoint/checkpoint_worker.ts`).
 *
 * The WAL header's checkpoint sequence number (bytes 12..15) changes when a
 * writer restarts the WAL after a complete checkpoint, so reading it after
 * each commit counts the checkpoints that completed.
 *
 * `deno run -A bench/probes/checkpoint/commit_tail.ts [rate] [seconds] [thread's frames] [pairs]`
 */
import { createIdentity } from "../../../src/attestation/identity.ts";
import { createReceiptService } from "../../../src/receipts/service.ts";
import { GroupCommitter, type KvWrite } from "../../../src/store/group_commit.ts";
import { CHECKPOINT_WORKER_URL, startCheckpointer } from "./checkpointer.ts";
import { gatewayLikeDraft } from "../receipt_cost/receipt_cost.ts";
import { percentile } from "../../stats.ts";

function walSeq(path: string): number {
  try {
    const f = Deno.openSync(`${path}-wal`, { read: true });
    const b = new Uint8Array(16);
    const n = f.readSync(b);
    f.close();
    return n === 16 ? new DataView(b.buffer).getUint32(12) : -1;
  } catch {
    return -1;
  }
}

export interface TailResult {
  mode: string;
  writes: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
  over5ms: number;
  over2ms: number;
  walRestarts: number;
  /** Mean latency of the writes just before a WAL restart (inline: the checkpointing commit). */
  restartMean: number;
  cpuUsPerReceipt: number;
  /** Checkpoint thread only: its runs and the longest WAL it saw (frames). */
  thread?: { runs: number; maxWalFrames: number; maxMs: number };
}

export async function commitTail(
  dir: string,
  rate: number,
  seconds: number,
  withThread: boolean,
  frames = 500,
): Promise<TailResult> {
  const path = `${dir}/tail_${withThread ? "thread" : "inline"}.kv`;
  const kv = await Deno.openKv(path);
  const cp = withThread
    ? await startCheckpointer(new Worker(CHECKPOINT_WORKER_URL, { type: "module" }), path, {
      frames,
    })
    : null;
  const now = Date.now();
  const identity = createIdentity({ subject: null, ttlSeconds: 86_400, now: Date.now });
  const receipts = createReceiptService(kv, { identity, now: Date.now, retentionDays: 30 });
  const committer = new GroupCommitter(kv);
  const lat: number[] = [];
  const restartLat: number[] = [];
  let seq = walSeq(path);
  let restarts = 0;
  const one = async (i: number) => {
    const writes: KvWrite[] = receipts.finalize(gatewayLikeDraft(i, Date.now()).draft);
    writes.push({ op: "sum", key: ["usage", "k1", "requests"], value: 1n });
    const t0 = performance.now();
    await committer.write(writes);
    const d = performance.now() - t0;
    lat.push(d);
    const s = walSeq(path);
    if (s !== seq) {
      // This commit restarted the WAL: the checkpoint completed in an earlier
      // one (inline: the commit just before, which crossed 1,000 frames).
      seq = s;
      restarts++;
      if (lat.length >= 2) restartLat.push(lat[lat.length - 2]);
    }
  };
  // Warm-up, not recorded.
  for (let i = 0; i < 200; i++) await one(i);
  lat.length = 0;
  restartLat.length = 0;
  restarts = 0;
  const { cpuUsage } = await import("node:process");
  const c0 = cpuUsage();
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const start = performance.now();
  const inflight: Promise<void>[] = [];
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor((performance.now() - start) / interval) + 1);
    while (sent < due) inflight.push(one(now + sent++));
    await new Promise((r) =>
      setTimeout(r, Math.max(0, start + sent * interval - performance.now()))
    );
  }
  await Promise.all(inflight);
  const c1 = cpuUsage(c0);
  const st = await cp?.stats();
  await cp?.stop();
  kv.close();
  return {
    mode: withThread ? `checkpoint thread @${frames}` : "auto-checkpoint in commits",
    writes: lat.length,
    p50: percentile(lat, 50),
    p99: percentile(lat, 99),
    p999: percentile(lat, 99.9),
    max: Math.max(...lat),
    over5ms: lat.filter((x) => x > 5).length,
    over2ms: lat.filter((x) => x > 2).length,
    walRestarts: restarts,
    restartMean: restartLat.reduce((a, b) => a + b, 0) / Math.max(1, restartLat.length),
    cpuUsPerReceipt: (c1.user + c1.system) / lat.length,
    thread: st && { runs: st.runs, maxWalFrames: st.maxWalFrames, maxMs: st.maxMs },
  };
}

if (import.meta.main) {
  const rate = Number(Deno.args[0] ?? 500);
  const seconds = Number(Deno.args[1] ?? 10);
  const dir = await Deno.makeTempDir({ prefix: "commit_tail_" });
  try {
    const frames = Number(Deno.args[2] ?? 500);
    const pairs = Number(Deno.args[3] ?? 2);
    for (const withThread of Array.from({ length: 2 * pairs }, (_, i) => i % 2 === 1)) {
      const r = await commitTail(dir, rate, seconds, withThread, frames);
      const f = (x: number) => x.toFixed(3);
      console.log(
        `${r.mode.padEnd(28)} ${r.writes} writes at ${rate}/s: p50 ${f(r.p50)} p99 ${f(r.p99)} ` +
          `p99.9 ${f(r.p999)} max ${
            f(r.max)
          } ms; >2 ms: ${r.over2ms}, >5 ms: ${r.over5ms}; WAL restarts ${r.walRestarts} ` +
          `(their writes' mean ${f(r.restartMean)} ms); CPU ${
            r.cpuUsPerReceipt.toFixed(1)
          } µs/receipt` +
          (r.thread
            ? `; thread: ${r.thread.runs} checkpoints, longest ${f(r.thread.maxMs)} ms, ` +
              `longest WAL ${r.thread.maxWalFrames} frames`
            : ""),
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
