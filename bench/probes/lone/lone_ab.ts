/**
 * Before/after for a change to what a lone request pays: a gateway from this
 * tree and one from another checkout (`--before DIR`, e.g. `git archive` of an
 * earlier commit), one request at a time (c=1), closed loop c=32 and open loop at 500 req/s, in
 * alternating rounds; prints server CPU per request (all threads, /proc) and
 * p50 latency, each round's pair and the median of the paired ratios.
 *
 *   deno run -A bench/probes/lone/lone_ab.ts --before /tmp/old-tree [--rounds 6] [--seconds 3]
 */
import { closedLoop, openLoop, type Target } from "../../load.ts";
import { gatewayModel, type GatewayUnderTest, startGateway } from "../../gateway_setup.ts";
import { cpuMs, pinSelf, spawnPinned } from "../../processes.ts";
import { median } from "../../stats.ts";
import { fmt } from "../../report.ts";
import { numFlag } from "../../standalone.ts";

await pinSelf(1);
const before = Deno.args[Deno.args.indexOf("--before") + 1];
const rounds = numFlag("rounds", 6);
const seconds = numFlag("seconds", 3);
const dir = await Deno.makeTempDir({ prefix: "lone-ab-" });
const mock = await spawnPinned(
  1,
  ["run", "-A", "bench/mock_upstream.ts"],
  /mock listening on (\S+)/,
);
const old = await import(`${before}/bench/gateway_setup.ts`) as {
  startGateway: typeof startGateway;
};
await Deno.mkdir(`${dir}/a`);
await Deno.mkdir(`${dir}/b`);
const gws: [string, GatewayUnderTest][] = [
  ["before", await old.startGateway(`${dir}/a`, mock.url, 0)],
  ["after", await startGateway(`${dir}/b`, mock.url, 0)],
];
const target = (g: GatewayUnderTest): Target => ({
  base: g.url,
  headers: { authorization: `Bearer ${g.key}` },
  model: gatewayModel,
});
type Load = "c=1" | "c=32" | "500/s";
const cpu = new Map<string, number[]>();
const p50 = new Map<string, number[]>();
const push = (m: Map<string, number[]>, k: string, v: number) =>
  (m.get(k) ?? m.set(k, []).get(k)!).push(v);
try {
  for (const [, g] of gws) await closedLoop(target(g), { concurrency: 32, seconds: 2 });
  for (let r = 0; r < rounds; r++) {
    for (const load of ["c=1", "c=32", "500/s"] as Load[]) {
      for (const [name, g] of r % 2 ? [...gws].reverse() : gws) {
        const c0 = cpuMs(g.pid);
        const res = load === "500/s"
          ? await openLoop(target(g), { rate: 500, seconds })
          : await closedLoop(target(g), { concurrency: load === "c=1" ? 1 : 32, seconds });
        const v = ((cpuMs(g.pid) - c0) * 1000) / Math.max(1, res.ok);
        push(cpu, `${name} ${load}`, v);
        push(p50, `${name} ${load}`, median(res.latencies));
        console.error(
          `round ${r + 1} ${load} ${name}: ${res.ok} ok, ${fmt(v, 0)} µs CPU/request, p50 ${
            fmt(median(res.latencies), 3)
          } ms`,
        );
      }
    }
  }
  const load = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  console.log(`${rounds} alternating rounds of ${seconds} s, load average at the end ${load}`);
  for (const l of ["c=1", "c=32", "500/s"]) {
    const b = cpu.get(`before ${l}`)!, a = cpu.get(`after ${l}`)!;
    const ratios = a.map((v, i) => v / b[i]);
    const lb = p50.get(`before ${l}`)!, la = p50.get(`after ${l}`)!;
    console.log(
      `${l}: CPU/request before ${fmt(median(b), 0)} → after ${fmt(median(a), 0)} µs ` +
        `(paired after/before: median ${fmt(median(ratios), 3)}, rounds ${
          ratios.map((v) => fmt(v, 2)).join(", ")
        }); p50 before ${fmt(median(lb), 3)} → after ${fmt(median(la), 3)} ms (paired ${
          la.map((v, i) => fmt(v / lb[i], 2)).join(", ")
        })`,
    );
  }
} finally {
  for (const [, g] of gws) await g.stop();
  await mock.stop();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
