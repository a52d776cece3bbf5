/**
 * Before/after for a change to the cost of long prompts: two gateways, one
 * from this tree and one from another checkout (`--before DIR`, e.g. an
 * exported earlier commit), the same prompt size, measured at c=4 in
 * alternating rounds; prints CPU per request (all threads) and req/s each.
 *
 *   deno run -A bench/probes/prompt/prompt_ab.ts --before /tmp/old-tree [--kib 256] [--rounds 4] [--seconds 3]
 */
import { encodeRequest } from "../../http_conn.ts";
import { type GatewayUnderTest, LONG_MODEL, startGateway } from "../../gateway_setup.ts";
import { cpuMs, pinSelf, spawnPinned } from "../../processes.ts";
import { median } from "../../stats.ts";
import { fmt } from "../../report.ts";
import { numFlag } from "../../standalone.ts";
import { promptBody, rawClosedLoop } from "../../prompt_size.ts";

await pinSelf(1);
const before = Deno.args[Deno.args.indexOf("--before") + 1];
const kib = numFlag("kib", 256);
const rounds = numFlag("rounds", 4);
const seconds = numFlag("seconds", 3);
const dir = await Deno.makeTempDir({ prefix: "gateway-prompt-ab-" });
const mock = await spawnPinned(
  1,
  ["run", "-A", "bench/mock_upstream.ts"],
  /mock listening on (\S+)/,
);
const limits = { body_bytes_in_flight_per_key: 64 * 1024 * 1024 };
const old = await import(`${before}/bench/gateway_setup.ts`) as {
  startGateway: typeof startGateway;
};
await Deno.mkdir(`${dir}/a`);
await Deno.mkdir(`${dir}/b`);
const gws: [string, GatewayUnderTest][] = [
  ["before", await old.startGateway(`${dir}/a`, mock.url, 0, [], undefined, {}, undefined, limits)],
  ["after", await startGateway(`${dir}/b`, mock.url, 0, [], undefined, {}, undefined, limits)],
];
const run = async (gw: GatewayUnderTest, s: number) => {
  const req = encodeRequest(new URL("/v1/chat/completions", gw.url), {
    headers: { "content-type": "application/json", authorization: `Bearer ${gw.key}` },
    body: promptBody(LONG_MODEL, kib),
  });
  const r = await rawClosedLoop(req, gw.url, 4, s);
  return { ok: r.ok, bad: r.errors, seconds: r.seconds };
};
const cpu = new Map<string, number[]>();
const rps = new Map<string, number[]>();
try {
  for (const [, g] of gws) await run(g, 1);
  for (let r = 0; r < rounds; r++) {
    for (const [name, g] of r % 2 ? [...gws].reverse() : gws) {
      const c0 = cpuMs(g.pid);
      const res = await run(g, seconds);
      if (res.bad) console.error(`${name}: ${res.bad} non-200`);
      const v = ((cpuMs(g.pid) - c0) * 1000) / Math.max(1, res.ok);
      (cpu.get(name) ?? cpu.set(name, []).get(name)!).push(v);
      (rps.get(name) ?? rps.set(name, []).get(name)!).push(res.ok / res.seconds);
      console.error(
        `round ${r + 1} ${name}: ${fmt(v, 0)} µs/request, ${fmt(res.ok / res.seconds, 1)} req/s`,
      );
    }
  }
  const load = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  console.log(
    `${kib} KiB prompts, c=4, ${rounds} alternating rounds of ${seconds} s (load ${load}): ` +
      [...cpu.keys()].map((n) =>
        `${n} ${fmt(median(cpu.get(n)!), 0)} µs CPU/request (rounds ${
          cpu.get(n)!.map((v) => fmt(v, 0)).join(", ")
        }), ${fmt(median(rps.get(n)!), 1)} req/s`
      ).join("; "),
  );
} finally {
  for (const [, g] of gws) await g.stop();
  await mock.stop();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
