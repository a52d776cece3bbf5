/**
 * Page faults and CPU per request of long prompts (bench/prompt_size.ts's
 * body, non-streamed chat at `--c`): the gateway's minor faults from
 * /proc/<pid>/stat and its CPU (all threads), two rounds after a warm-up.
 * Each minor fault costs ~15–18 µs on the bench VM (docs/decisions/prompt-pieces.md).
 * `--v8 FLAGS` adds V8 flags to the gateway's (e.g. `--no-large-page-pool`).
 *
 *   deno run -A bench/probes/prompt/prompt_faults.ts [--kib 256] [--c 4] [--seconds 4] [--v8 FLAGS]
 */
import { encodeRequest } from "../../http_conn.ts";
import { LONG_MODEL, startGateway } from "../../gateway_setup.ts";
import { pinSelf, schedCpuMs, spawnPinned } from "../../processes.ts";
import { numFlag } from "../../standalone.ts";
import { promptBody, rawClosedLoop } from "../../prompt_size.ts";

await pinSelf(1);
const kib = numFlag("kib", 256);
const seconds = numFlag("seconds", 4);
const conc = numFlag("c", 4);
const v8At = Deno.args.indexOf("--v8");
const flags = v8At >= 0 ? [`--v8-flags=${Deno.args[v8At + 1]}`] : [];
const dir = await Deno.makeTempDir({ prefix: "gateway-prompt-faults-" });
const mock = await spawnPinned(
  1,
  ["run", "-A", "bench/mock_upstream.ts"],
  /mock listening on (\S+)/,
);
const gw = await startGateway(dir, mock.url, 0, flags, undefined, {}, undefined, {
  body_bytes_in_flight_per_key: 64 * 1024 * 1024,
});
const req = encodeRequest(new URL("/v1/chat/completions", gw.url), {
  headers: { "content-type": "application/json", authorization: `Bearer ${gw.key}` },
  body: promptBody(LONG_MODEL, kib),
});
/** Minor faults so far (field 10 of /proc/<pid>/stat). */
const faults = () =>
  Number(Deno.readTextFileSync(`/proc/${gw.pid}/stat`).split(") ")[1].split(" ")[7]);
const run = async (s: number) => (await rawClosedLoop(req, gw.url, conc, s)).ok;
try {
  await run(2);
  for (let r = 0; r < 2; r++) {
    const f0 = faults();
    const c0 = schedCpuMs(gw.pid);
    const ok = await run(seconds);
    const f1 = faults();
    const c1 = schedCpuMs(gw.pid);
    console.log(
      `${kib} KiB c=${conc}${flags.length ? ` ${flags[0]}` : ""}: ${ok} requests, ${
        ((c1 - c0) * 1000 / ok).toFixed(0)
      } µs CPU/request, ${((f1 - f0) / ok).toFixed(1)} page faults/request`,
    );
  }
} finally {
  await gw.stop();
  await mock.stop();
  await Deno.remove(dir, { recursive: true });
}
