/**
 * The transparency log's cost per entry in one process, without HTTP: 32
 * writers commit receipt-sized rows through the real group committer, with
 * the receipt's pending log entry (`on`) or without (`off`), and the real
 * sequencer appends them. Prints process CPU per entry split by thread (the
 * JS main thread, V8's helpers — mostly GC —, and KV's SQLite thread, "sw").
 * Noisy on a shared machine: run `on` and `off` alternately, several times.
 *
 *   deno run -A bench/probes/tlog_inprocess/tlog_inprocess.ts on|off [entries] [batch_ms]
 */
import { GroupCommitter } from "../../../src/store/group_commit.ts";
import { createTransparencyLog } from "../../../src/tlog/log.ts";
import { cpuMs, threadCpuMs } from "../../processes.ts";

const on = Deno.args[0] === "on";
const total = Number(Deno.args[1] ?? 15_000);
const batchMs = Number(Deno.args[2] ?? 100);
const dir = await Deno.makeTempDir({ prefix: "tlog-inprocess-" });
const kv = await Deno.openKv(`${dir}/kv`);
const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
let appends = 0;
const log = createTransparencyLog({
  kv,
  origin: "bench.example/v1/aci/log",
  now: Date.now,
  randomBytes: random,
  // A signature line's size; Ed25519 itself is measured elsewhere (and is a few µs per append).
  sign: () => `— bench.example/v1/aci/log ${btoa(String.fromCharCode(...random(68)))}`,
  witnesses: [],
  requiredCosignatures: 0,
  sweepIntervalMs: 250,
  batchMs,
  onAppend: () => appends++,
  log: () => {},
});
const committer = new GroupCommitter(kv, { onDurable: () => log.kick() });
const row = "r".repeat(1500); // about a receipt row
let started = 0;
const cpu0 = cpuMs(Deno.pid);
const threads0 = threadCpuMs(Deno.pid);
const wall0 = performance.now();
await Promise.all(Array.from({ length: 32 }, async () => {
  while (started++ < total) {
    const id = hex(random(16));
    const ops = [{ op: "set" as const, key: ["receipt", id], value: row }];
    // With the log, what the receipt service adds: the entry (the receipt's digest) and its frame.
    await committer.write(
      on ? [...ops, log.pendingReceipt(row + id, Math.floor(Date.now() / 1000))] : ops,
    );
    await new Promise((r) => setTimeout(r, 1)); // paced a little, as requests are
  }
}));
await log.settle();
const perEntry = (ms: number) => ((ms * 1000) / total).toFixed(1);
const threads1 = threadCpuMs(Deno.pid);
console.log(
  `${on ? "on " : "off"} ${perEntry(cpuMs(Deno.pid) - cpu0)} µs CPU/entry (${
    [...threads1].map(([k, v]) => `${k.trim()} ${perEntry(v - (threads0.get(k) ?? 0))}`).join(", ")
  }); ${appends} appends; ${((performance.now() - wall0) / 1000).toFixed(1)} s; load ${
    Deno.readTextFileSync("/proc/loadavg").split(" ")[0]
  }`,
);
await log.close();
await committer.close();
kv.close();
await Deno.remove(dir, { recursive: true });
