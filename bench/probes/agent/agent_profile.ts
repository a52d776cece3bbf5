/**
 * Where a coding agent's turn goes (bench/agent_turns.ts's conversation, c=1,
 * a 200k-token context): a gateway under `--cpu-prof`, sent `--warm` turns
 * unmeasured then `--turns` measured ones; prints the main thread's profile
 * over the measured turns.
 *
 *   deno run -A bench/probes/agent/agent_profile.ts [--turns 30] [--warm 16] [--kib 200] [--anthropic]
 */
import { encodeRequest, HttpConn } from "../../http_conn.ts";
import { startGateway } from "../../gateway_setup.ts";
import { pinSelf, ROOT, spawnPinned } from "../../processes.ts";
import { summarizeProfile } from "../../cpu_profile.ts";
import { fmt, renderProfile } from "../../report.ts";
import { numFlag } from "../../standalone.ts";
import { agentBodies } from "../../agent_turns.ts";

await pinSelf(1);
const turns = numFlag("turns", 30);
const warm = numFlag("warm", 16);
const kib = numFlag("kib", 200);
const anthropic = Deno.args.includes("--anthropic");
const dir = await Deno.makeTempDir({ prefix: "gateway-agent-prof-" });
const mock = await spawnPinned(
  1,
  ["run", "-A", "bench/mock_upstream.ts"],
  /mock listening on (\S+)/,
);
const gw = await startGateway(
  dir,
  mock.url,
  0,
  ["--cpu-prof", `--cpu-prof-dir=${dir}`],
  undefined,
  {},
  undefined,
  { body_bytes_in_flight_per_key: 64 * 1024 * 1024 },
);
const bodies = agentBodies(warm + turns, kib, undefined, anthropic ? "anthropic" : "chat");
const url = new URL(gw.url);
const path = anthropic ? "/v1/messages" : "/v1/chat/completions";
const send = async (body: string) => {
  const c = await HttpConn.open(url);
  const res = await c.request(encodeRequest(new URL(path, url), {
    headers: { "content-type": "application/json", authorization: `Bearer ${gw.key}` },
    body,
  }));
  c.close();
  if (res.status !== 200) {
    throw new Error(`turn: ${res.status}`);
  }
  await new Promise((r) => setTimeout(r, 20));
};
for (const b of bodies.slice(0, warm)) await send(b);
const start = performance.now();
for (const b of bodies.slice(warm)) await send(b);
const stop = performance.now();
await gw.stop();
await mock.stop();
const exited = performance.now();
const file = [...Deno.readDirSync(dir)].find((e) => e.name.endsWith(".cpuprofile"))!;
const json: unknown = JSON.parse(await Deno.readTextFile(`${dir}/${file.name}`));
const s = summarizeProfile(json, ROOT, {
  top: 30,
  window: { fromEndMs: exited - start, toEndMs: exited - stop },
});
console.log(
  renderProfile(
    s,
    `coding agent turns (${anthropic ? "Anthropic" : "chat"}), ${turns} measured after ${warm}, ${
      fmt((s.busyMs * 1000) / turns, 0)
    } µs main-thread per turn`,
  ),
);
await Deno.remove(dir, { recursive: true });
