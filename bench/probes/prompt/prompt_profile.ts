/**
 * Where a long prompt's CPU goes: a gateway under `--cpu-prof`, driven with
 * non-streamed chat of one prompt size (bench/prompt_size.ts's body) at c=4.
 *
 *   deno run -A bench/probes/prompt/prompt_profile.ts [--kib 256] [--seconds 5] [--c 4]
 *     [--callers op_write,op_kv_atomic_write] [--top 25]
 *
 * `--callers` also prints, for each named function, the project frames its
 * self time was spent under (nearest `src/` caller first).
 */
import { encodeRequest } from "../../http_conn.ts";
import { LONG_MODEL, startGateway } from "../../gateway_setup.ts";
import { pinSelf, ROOT, spawnPinned } from "../../processes.ts";
import { callersOf, summarizeProfile } from "../../cpu_profile.ts";
import { fmt, renderProfile } from "../../report.ts";
import { numFlag, strFlag } from "../../standalone.ts";
import { promptBody, rawClosedLoop } from "../../prompt_size.ts";

await pinSelf(1);
const kib = numFlag("kib", 256);
const seconds = numFlag("seconds", 5);
const concurrency = numFlag("c", 4);
const callers = strFlag("callers", "").split(",").filter((f) => f !== "");
const dir = await Deno.makeTempDir({ prefix: "gateway-prompt-prof-" });
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
  {
    body_bytes_in_flight_per_key: 64 * 1024 * 1024,
  },
);
const req = encodeRequest(new URL("/v1/chat/completions", gw.url), {
  headers: { "content-type": "application/json", authorization: `Bearer ${gw.key}` },
  body: promptBody(LONG_MODEL, kib),
});
const run = async (s: number) => (await rawClosedLoop(req, gw.url, concurrency, s)).ok;
await run(1);
const start = performance.now();
const ok = await run(seconds);
const stop = performance.now();
await gw.stop();
await mock.stop();
const exited = performance.now();
const file = [...Deno.readDirSync(dir)].find((e) => e.name.endsWith(".cpuprofile"))!;
const json: unknown = JSON.parse(await Deno.readTextFile(`${dir}/${file.name}`));
const s = summarizeProfile(json, ROOT, {
  top: numFlag("top", 25),
  window: { fromEndMs: exited - start, toEndMs: exited - stop },
});
console.log(
  renderProfile(
    s,
    `${kib} KiB prompts at c=${concurrency}, ${ok} requests, ${
      fmt((s.busyMs * 1000) / ok, 0)
    } µs main-thread per request`,
  ),
);
for (const fn of callers) {
  console.log(`\nSelf time of ${fn} by nearest project caller:\n`);
  for (
    const c of callersOf(json, ROOT, fn, { fromEndMs: exited - start, toEndMs: exited - stop })
  ) {
    console.log(`- ${fmt(c.ms, 1)} ms \`${c.name}\``);
  }
}
await Deno.remove(dir, { recursive: true });
