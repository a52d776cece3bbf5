/**
 * What a lone request pays that a batched one does not (#27): the gateway at
 * c=1 and at c=32, alternating, counting from its own metrics (scraped before
 * and after each load) the durable group commits and the mutations per
 * request, with server CPU per request (all threads, /proc).
 *
 *   deno run -A bench/probes/lone/lone_request.ts [--rounds N] [--seconds S]
 */
import { closedLoop } from "../../load.ts";
import { gatewayModel, startGateway } from "../../gateway_setup.ts";
import { cpuMs } from "../../processes.ts";
import { median } from "../../stats.ts";
import { fmt, type Row } from "../../report.ts";
import { type MeasureOptions, runStandalone } from "../../standalone.ts";

const TOKEN = "bench-operator-token-" + "a1b2c3d4".repeat(4);

/** `name{…} value` summed over label sets, from a Prometheus text page. */
function metric(page: string, name: string): number {
  let v = 0;
  for (const line of page.split("\n")) {
    if (line.startsWith(name + " ") || line.startsWith(name + "{")) {
      v += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return v;
}

export async function loneRequestRows(o: MeasureOptions): Promise<Row[]> {
  await Deno.mkdir(o.dir, { recursive: true });
  const gw = await startGateway(o.dir, o.mockUrl, o.serverCpu, [], undefined, {
    GATEWAY_ADMIN_TOKEN: TOKEN,
  });
  const scrape = async () => {
    const r = await fetch(`${gw.url}/admin/v1/metrics`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    return await r.text();
  };
  const t = { base: gw.url, headers: { authorization: `Bearer ${gw.key}` }, model: gatewayModel };
  const out = new Map<number, { commits: number[]; mutations: number[]; cpu: number[] }>();
  try {
    await closedLoop(t, { concurrency: 32, seconds: 1 });
    for (let r = 0; r < o.rounds; r++) {
      for (const c of r % 2 ? [32, 1] : [1, 32]) {
        const before = await scrape();
        const c0 = cpuMs(gw.pid);
        const res = await closedLoop(t, { concurrency: c, seconds: o.seconds });
        const cpu = ((cpuMs(gw.pid) - c0) * 1000) / res.ok;
        const after = await scrape();
        const d = (n: string) => metric(after, n) - metric(before, n);
        const e = out.get(c) ?? { commits: [], mutations: [], cpu: [] };
        e.commits.push(d("gateway_group_commit_mutations_count") / res.ok);
        e.mutations.push(d("gateway_group_commit_mutations_sum") / res.ok);
        e.cpu.push(cpu);
        out.set(c, e);
        o.log(
          `c=${c}: ${res.ok} ok, ${fmt(e.commits.at(-1)!, 3)} commits and ${
            fmt(e.mutations.at(-1)!, 1)
          } mutations per request, ${fmt(cpu, 0)} µs CPU`,
        );
      }
    }
  } finally {
    await gw.stop();
  }
  const m = (c: number, k: "commits" | "mutations" | "cpu", d = 2) =>
    fmt(median(out.get(c)![k]), d);
  return [{
    metric: "Per request, c=1 vs c=32: durable group commits / KV mutations / server CPU (µs) " +
      "(gateway metrics; the commits a lone request does not share)",
    gateway: `c=1: ${m(1, "commits", 3)} / ${m(1, "mutations", 1)} / ${m(1, "cpu", 0)}; c=32: ${
      m(32, "commits", 3)
    } / ${m(32, "mutations", 1)} / ${m(32, "cpu", 0)}`,
  }];
}

if (import.meta.main) {
  await runStandalone("lone", { rounds: 2, seconds: 3 }, loneRequestRows);
}
