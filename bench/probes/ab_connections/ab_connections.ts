/**
 * `deno run -A bench/probes/ab_connections/ab_connections.ts <other checkout>`: the gateway of this
 * checkout against the gateway of another (e.g. main before #15's accept
 * loop), alternating closed-loop runs at several concurrencies on the same
 * mock upstream, each server pinned to core 0. Prints req/s and p50 per run
 * and the medians: what the accept loop costs per request.
 */
import { closedLoop, type Target } from "../../load.ts";
import { ROOT, type Server, spawnPinned } from "../../processes.ts";
import { gatewayModel, startGateway } from "../../gateway_setup.ts";
import { median, percentile } from "../../stats.ts";

const other = Deno.args[0];
if (!other) throw new Error("usage: ab_connections.ts <other checkout> [rounds] [seconds]");
const rounds = Number(Deno.args[1] ?? 3);
const seconds = Number(Deno.args[2] ?? 2);
const { startGateway: startOther } = await import(`${other}/bench/gateway_setup.ts`);

const servers: Server[] = [];
const dirA = await Deno.makeTempDir({ prefix: "ab-this-" });
const dirB = await Deno.makeTempDir({ prefix: "ab-other-" });
try {
  const mock = await spawnPinned(
    1,
    ["run", "-A", "bench/mock_upstream.ts"],
    /mock listening on (\S+)/,
  );
  servers.push(mock);
  const a = await startGateway(dirA, mock.url, 0);
  servers.push(a);
  const b = await startOther(dirB, mock.url, 0) as typeof a;
  servers.push(b);
  const target = (g: typeof a): Target => ({
    base: g.url,
    headers: { authorization: `Bearer ${g.key}` },
    model: gatewayModel,
  });
  const results: Record<string, { rps: number[]; p50: number[] }> = {};
  for (let r = 0; r < rounds; r++) {
    for (const c of [1, 32, 128]) {
      for (
        const [name, g] of (r % 2 ? [["other", b], ["this", a]] : [["this", a], ["other", b]]) as [
          string,
          typeof a,
        ][]
      ) {
        const res = await closedLoop(target(g), { concurrency: c, seconds });
        const key = `${name} c=${c}`;
        results[key] ??= { rps: [], p50: [] };
        results[key].rps.push(res.ok / res.seconds);
        results[key].p50.push(percentile(res.latencies, 0.5));
        console.error(
          `[ab] round ${r + 1} ${key}: ${(res.ok / res.seconds).toFixed(0)} req/s, p50 ${
            percentile(res.latencies, 0.5).toFixed(3)
          } ms, errors ${res.errors}`,
        );
      }
    }
  }
  console.log(`| run (${ROOT}) | req/s (median of ${rounds}) | p50 ms (median) |`);
  console.log("|---|---:|---:|");
  for (const [k, v] of Object.entries(results)) {
    console.log(`| ${k} | ${median(v.rps).toFixed(0)} | ${median(v.p50).toFixed(3)} |`);
  }
} finally {
  for (const s of servers.reverse()) await s.stop();
}
