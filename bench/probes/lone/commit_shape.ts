/**
 * What the lone request's commit costs by its shape (#27): commits one at a
 * time (as at c=1: nothing to share them with) through the `GroupCommitter`
 * on a disk file, in alternating blocks of three shapes —
 *   floor:    the receipt row alone (the receipt floor's commit),
 *   receipt:  receipt row + chat-id index + the log's pending frame (what the
 *             receipt rule and the log need),
 *   sums:     that + the 13 settlement sums of a lease-admitted chat (hold
 *             closed ×3, credit and token refunds, usage totals ×4, usage
 *             per day and model ×4), as the gateway wrote them before
 *             deferred usage sums,
 *   gateway:  the same settlement as the gateway writes it now: the 8 usage
 *             counters and the 3 hold closings deferred into the replica's
 *             pending row (a second
 *             committer with `DeferredSums`, store/deferred_sums.ts; applied
 *             once a second, by whichever commit comes then),
 * with the replica fence check on every commit as the gateway makes it.
 * Prints latency p50/p99 and process CPU per commit.
 *
 *   deno run -A bench/probes/lone/commit_shape.ts [--rounds N] [--block B]
 */
import { GroupCommitter, type KvWrite } from "../../../src/store/group_commit.ts";
import { DeferredSums } from "../../../src/store/deferred_sums.ts";
import { cpuMs } from "../../processes.ts";
import { median, percentile } from "../../stats.ts";
import { numFlag } from "../../standalone.ts";

const rounds = numFlag("rounds", 6);
const block = numFlag("block", 300);
const dir = await Deno.makeTempDir({ prefix: "commit-shape-" });
const kv = await Deno.openKv(`${dir}/store.kv`);
const committer = new GroupCommitter(kv, {
  fence: { key: ["hold_fence", "r1"], error: () => new Error("fenced") },
});
const deferring = new GroupCommitter(kv, {
  fence: { key: ["hold_fence", "r1"], error: () => new Error("fenced") },
  deferred: new DeferredSums({
    row: ["usage_pending", "r1"],
    flushMs: 1000,
    maxEntries: 64,
    now: Date.now,
  }),
});
const rnd = (n: number) => crypto.getRandomValues(new Uint8Array(n));
const hex = (n: number) => Array.from(rnd(n), (b) => b.toString(16).padStart(2, "0")).join("");
const keyId = "k_" + hex(8);
let seq = 0;

function receiptOps(): KvWrite[] {
  const id = "rcpt_" + hex(16);
  return [
    { op: "set", key: ["receipts", id], value: rnd(435), expireIn: 30 * 86_400_000 },
    { op: "set", key: ["receipt_by_chat", "chatcmpl-" + hex(12), hex(32)], value: id },
    {
      op: "frame",
      key: ["tlog", "pending", Date.now(), hex(6) + (seq++).toString(36)],
      value: rnd(40),
    },
  ];
}
function settlementOps(usage: "sum" | "defer" = "sum"): KvWrite[] {
  const sum = (key: Deno.KvKey, value: bigint): KvWrite => ({ op: "sum", key, value });
  const use = (key: Deno.KvKey, value: bigint): KvWrite => ({ op: usage, key, value });
  const day = new Date().toISOString().slice(0, 10);
  return [
    use(["hold", "r1", keyId, "closed"], 1000n),
    use(["hold", "r1", keyId, "req_closed"], 1n),
    use(["hold", "r1", keyId, "tok_closed"], 40n),
    sum(["acct", keyId, "refund"], 300n),
    sum(["acct", keyId, "tok_refund"], 20n),
    ...["requests", "prompt_tokens", "completion_tokens", "spent_nano"].flatMap((f) => [
      use(["usage", keyId, f], 7n),
      use(["usage_day", keyId, day, "bench/chat", f], 7n),
    ]),
  ];
}
const shapes: Record<string, () => KvWrite[]> = {
  floor: () => receiptOps().slice(0, 1),
  receipt: receiptOps,
  sums: () => [...receiptOps(), ...settlementOps()],
  gateway: () => [...receiptOps(), ...settlementOps("defer")],
};
const committerOf = (name: string) => name === "gateway" ? deferring : committer;
/** Mutations a lone commit of the shape makes (the fence check counted): 11 deferred = 1 row. */
const mutationsOf = (name: string) =>
  name === "gateway" ? shapes[name]().length + 1 - 10 : shapes[name]().length + 1;
const lat: Record<string, number[]> = {};
const p50s: Record<string, number[]> = {};
const cpu: Record<string, number[]> = {};
for (const name of Object.keys(shapes)) {
  for (let i = 0; i < 50; i++) await committerOf(name).write(shapes[name]());
}
for (let r = 0; r < rounds; r++) {
  const names = Object.keys(shapes);
  for (const name of r % 2 ? names.reverse() : names) {
    const l: number[] = [];
    const c0 = cpuMs(Deno.pid);
    for (let i = 0; i < block; i++) {
      const ops = shapes[name]();
      const t0 = performance.now();
      await committerOf(name).write(ops);
      l.push(performance.now() - t0);
    }
    (cpu[name] ??= []).push(((cpuMs(Deno.pid) - c0) * 1000) / block);
    (lat[name] ??= []).push(...l);
    (p50s[name] ??= []).push(median(l));
  }
}
await committer.close();
await deferring.close();
kv.close();
await Deno.remove(dir, { recursive: true });
console.log(
  `| shape (${rounds} alternating blocks of ${block} sequential commits) | mutations | p50 ms (block p50s) | p99 ms | CPU µs/commit (median of blocks) |`,
);
console.log("|---|---:|---:|---:|---:|");
for (const name of Object.keys(shapes)) {
  console.log(
    `| ${name} | ${mutationsOf(name)} | ${median(lat[name]).toFixed(3)} (${
      p50s[name].map((v) => v.toFixed(3)).join(", ")
    }) | ${percentile(lat[name], 99).toFixed(3)} | ${median(cpu[name]).toFixed(0)} |`,
  );
}
console.log(`load average ${Deno.readTextFileSync("/proc/loadavg").trim()}`);
