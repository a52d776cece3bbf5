/**
 * The coding agent's turn (bench/agent_turns.ts) through the gateway: a ~100k-
 * token conversation one turn longer each request, c=1, a model of 200k
 * context (its prompt is counted). Prints the gateway's CPU per request (all
 * live threads from their schedstat, summed over the turns) and its added latency over the mock directly (medians).
 * With `--before DIR` (another checkout, e.g. `git worktree add /tmp/old HEAD~1`)
 * the two gateways alternate turn by turn, each sent the same conversation.
 *
 * `--anthropic`: the gateway is sent the conversation as Claude Code sends it
 * (`/v1/messages`; translated to chat for the mock), the mock the chat form.
 *
 *   deno run -A bench/probes/agent/agent_ab.ts [--before /tmp/old-tree] [--turns 30] [--kib 300] [--anthropic]
 */
import { encodeRequest, HttpConn } from "../../http_conn.ts";
import { type GatewayUnderTest, startGateway } from "../../gateway_setup.ts";
import { pinSelf, schedCpuMs, spawnPinned } from "../../processes.ts";
import { median } from "../../stats.ts";
import { fmt } from "../../report.ts";
import { numFlag } from "../../standalone.ts";
import { agentBodies } from "../../agent_turns.ts";

await pinSelf(1);
const at = Deno.args.indexOf("--before");
const before = at >= 0 ? Deno.args[at + 1] : undefined;
const turns = numFlag("turns", 30);
const kib = numFlag("kib", 300);
const dir = await Deno.makeTempDir({ prefix: "gateway-agent-ab-" });
const mock = await spawnPinned(
  1,
  ["run", "-A", "bench/mock_upstream.ts"],
  /mock listening on (\S+)/,
);
const limits = { body_bytes_in_flight_per_key: 64 * 1024 * 1024 };
const gws: [string, GatewayUnderTest][] = [];
if (before) {
  const old = await import(`${before}/bench/gateway_setup.ts`) as {
    startGateway: typeof startGateway;
  };
  await Deno.mkdir(`${dir}/a`);
  gws.push([
    "before",
    await old.startGateway(`${dir}/a`, mock.url, 0, [], undefined, {}, undefined, limits),
  ]);
}
await Deno.mkdir(`${dir}/b`);
gws.push([
  before ? "after" : "gateway",
  await startGateway(`${dir}/b`, mock.url, 0, [], undefined, {}, undefined, limits),
]);
const anthropic = Deno.args.includes("--anthropic");
const bodies = agentBodies(turns + 2, kib, undefined, anthropic ? "anthropic" : "chat");
const direct = agentBodies(turns + 2, kib, "chat");
const send = async (base: string, key: string | null, body: string) => {
  const c = await HttpConn.open(new URL(base));
  const path = key && anthropic ? "/v1/messages" : "/v1/chat/completions";
  const req = encodeRequest(new URL(path, base), {
    headers: {
      "content-type": "application/json",
      ...(key ? { authorization: `Bearer ${key}` } : {}),
    },
    body,
  });
  const t0 = performance.now();
  const r = await c.request(req);
  const ms = performance.now() - t0;
  c.close();
  if (r.status !== 200) throw new Error(`status ${r.status}`);
  return ms;
};
const cpu = new Map<string, number[]>();
const faults = new Map<string, number[]>();
/** Minor page faults of `pid` so far (field 10 of /proc/<pid>/stat). */
const minorFaults = (pid: number) =>
  Number(Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ")[7]);
const added = new Map<string, number[]>();
try {
  // Two unmeasured turns warm each path (the tokenizer's tables, the JIT).
  for (let i = 0; i < bodies.length; i++) {
    const directMs = await send(mock.url, null, direct[i]);
    for (const [name, g] of i % 2 ? [...gws].reverse() : gws) {
      const c0 = schedCpuMs(g.pid);
      const f0 = minorFaults(g.pid);
      const ms = await send(g.url, g.key, bodies[i]);
      // The CPU a request costs includes work finished just after its answer (the commit).
      await new Promise((r) => setTimeout(r, 30));
      if (i < 2) continue;
      (cpu.get(name) ?? cpu.set(name, []).get(name)!).push(schedCpuMs(g.pid) - c0);
      (faults.get(name) ?? faults.set(name, []).get(name)!).push(minorFaults(g.pid) - f0);
      (added.get(name) ?? added.set(name, []).get(name)!).push(ms - directMs);
    }
  }
  const load = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  const kb = (s: string) => fmt(new TextEncoder().encode(s).length / 1024, 0);
  console.log(
    `coding agent turns (${turns}, bodies ${kb(bodies[2])}–${
      kb(bodies.at(-1)!)
    } KiB, c=1, load ${load}): ` +
      [...cpu.keys()].map((n) =>
        `${n} ${
          fmt(cpu.get(n)!.reduce((a, b) => a + b, 0) * 1000 / turns, 0)
        } µs CPU/request, added p50 ${fmt(median(added.get(n)!), 2)} ms, ${
          fmt(median(faults.get(n)!), 0)
        } page faults/request (median)`
      ).join("; "),
  );
} finally {
  for (const [, g] of gws) await g.stop();
  await mock.stop();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
