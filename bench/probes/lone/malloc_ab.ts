/**
 * Does glibc's allocator set-up change what a lone request costs? Two gateways
 * of this checkout on one mock, one started with `GLIBC_TUNABLES` (default:
 * fast bins off, so no `malloc_consolidate`, which perf showed on the main
 * thread inside the KV commit's native part: docs/decisions/lone-request.md),
 * alternating rounds at c=1 and c=32; CPU per request by thread, medians.
 *
 *   deno run -A bench/probes/lone/malloc_ab.ts [--rounds N] [--seconds S] [--tunables T]
 */
import { closedLoop, type Target } from "../../load.ts";
import { gatewayModel, startGateway } from "../../gateway_setup.ts";
import { threadCpuMs } from "../../processes.ts";
import { median } from "../../stats.ts";
import { fmt, type Row } from "../../report.ts";
import { type MeasureOptions, runStandalone } from "../../standalone.ts";

const flag = (name: string): string | undefined => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Deno.args[i + 1] : undefined;
};
const TUNABLES = flag("tunables") ?? "glibc.malloc.mxfast=0";

export async function mallocRows(o: MeasureOptions): Promise<Row[]> {
  for (const d of ["default", "tuned"]) await Deno.mkdir(`${o.dir}/${d}`, { recursive: true });
  const sides = {
    default: await startGateway(`${o.dir}/default`, o.mockUrl, o.serverCpu),
    tuned: await startGateway(`${o.dir}/tuned`, o.mockUrl, o.serverCpu, [], undefined, {
      GLIBC_TUNABLES: TUNABLES,
    }),
  };
  const out = new Map<string, number[]>();
  try {
    const target = (g: typeof sides.default): Target => ({
      base: g.url,
      headers: { authorization: `Bearer ${g.key}` },
      model: gatewayModel,
    });
    for (const g of Object.values(sides)) {
      await closedLoop(target(g), { concurrency: 32, seconds: 1 });
    }
    for (let r = 0; r < o.rounds; r++) {
      const order = r % 2 ? ["tuned", "default"] as const : ["default", "tuned"] as const;
      for (const name of order) {
        const g = sides[name];
        for (const c of [1, 32]) {
          const before = threadCpuMs(g.pid);
          const res = await closedLoop(target(g), { concurrency: c, seconds: o.seconds });
          const after = threadCpuMs(g.pid);
          let total = 0;
          const parts: string[] = [];
          for (const [th, v] of after) {
            const us = ((v - (before.get(th) ?? 0)) * 1000) / res.ok;
            total += us;
            if (us >= 5) parts.push(`${th.trim()} ${fmt(us, 0)}`);
          }
          const key = `${name} c=${c}`;
          out.set(key, [...(out.get(key) ?? []), total]);
          o.log(`${key}: ${res.ok} ok, ${fmt(total, 0)} µs CPU/request (${parts.join(", ")})`);
        }
      }
    }
  } finally {
    for (const g of Object.values(sides)) await g.stop();
  }
  return [1, 32].map((c) => ({
    metric: `CPU per request at c=${c}, median of ${o.rounds} rounds (µs): default / ${TUNABLES}`,
    gateway: `${fmt(median(out.get(`default c=${c}`)!), 0)} / ${
      fmt(median(out.get(`tuned c=${c}`)!), 0)
    }`,
  }));
}

if (import.meta.main) await runStandalone("malloc", { rounds: 4, seconds: 3 }, mallocRows);
