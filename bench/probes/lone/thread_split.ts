/**
 * Where a lone request's CPU goes by thread: the gateway and the receipt floor,
 * alternating at c=1 (and c=32 for contrast), CPU per request of each thread
 * group (the JS main thread, the KV's SQLite thread, tokio workers, V8 helpers).
 *
 *   deno run -A bench/probes/lone/thread_split.ts [--rounds N] [--seconds S]
 */
import { closedLoop, type Target } from "../../load.ts";
import { gatewayModel, startGateway } from "../../gateway_setup.ts";
import { spawnPinned, threadCpuMs } from "../../processes.ts";
import { median } from "../../stats.ts";
import { fmt, type Row } from "../../report.ts";
import { type MeasureOptions, runStandalone } from "../../standalone.ts";

export async function threadSplitRows(o: MeasureOptions): Promise<Row[]> {
  await Deno.mkdir(o.dir, { recursive: true });
  const gw = await startGateway(o.dir, o.mockUrl, o.serverCpu);
  const floor = await spawnPinned(
    o.serverCpu,
    ["run", "-A", "bench/receipt_floor.ts", o.mockUrl, `${o.dir}/floor.kv`],
    /floor listening on (\S+)/,
  );
  const targets: Record<string, { t: Target; pid: number }> = {
    gateway: {
      t: { base: gw.url, headers: { authorization: `Bearer ${gw.key}` }, model: gatewayModel },
      pid: gw.pid,
    },
    floor: { t: { base: floor.url, headers: {}, model: (m) => m }, pid: floor.pid },
  };
  /** path → concurrency → thread → µs per request, one per round. */
  const out = new Map<string, Map<string, number[]>>();
  try {
    for (const { t } of Object.values(targets)) {
      await closedLoop(t, { concurrency: 32, seconds: 1 });
    }
    for (let r = 0; r < o.rounds; r++) {
      for (
        const [name, { t, pid }] of r % 2
          ? Object.entries(targets).reverse()
          : Object.entries(targets)
      ) {
        for (const c of [1, 32]) {
          const before = threadCpuMs(pid);
          const res = await closedLoop(t, { concurrency: c, seconds: o.seconds });
          const after = threadCpuMs(pid);
          const key = `${name} c=${c}`;
          const m = out.get(key) ?? new Map<string, number[]>();
          let total = 0;
          for (const [th, v] of after) {
            const us = ((v - (before.get(th) ?? 0)) * 1000) / res.ok;
            total += us;
            m.set(th, [...(m.get(th) ?? []), us]);
          }
          m.set("(all)", [...(m.get("(all)") ?? []), total]);
          out.set(key, m);
          o.log(`${key}: ${res.ok} ok, ${fmt(total, 0)} µs CPU per request`);
        }
      }
    }
  } finally {
    await gw.stop();
    await floor.stop();
  }
  const rows: Row[] = [];
  for (const [key, m] of out) {
    const parts = [...m.entries()].map(([th, v]) => [th, median(v)] as const)
      .filter(([, v]) => v >= 5).sort((a, b) => b[1] - a[1]);
    rows.push({
      metric: `${key}: CPU per request by thread (µs, median of rounds)`,
      gateway: parts.map(([th, v]) => `${th} ${fmt(v, 0)}`).join("; "),
    });
  }
  return rows;
}

if (import.meta.main) {
  await runStandalone("thread-split", { rounds: 4, seconds: 3 }, threadSplitRows);
}
