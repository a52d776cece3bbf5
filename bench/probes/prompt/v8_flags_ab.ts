/**
 * Do V8 flags change what a prompt costs? Two gateways of this checkout on
 * one mock and one core, the second started with `--flags` added to the
 * gateway's own V8 flags (enclave/build_args.ts), driven in alternating
 * rounds with non-streamed chat of one prompt size at `--c`; server CPU per
 * request (all threads) and V8's GC pauses per request (`--trace-gc` lines of
 * each gateway's stdout), medians of the rounds.
 *
 *   deno run -A bench/probes/prompt/v8_flags_ab.ts --flags=--min-semi-space-size=8 \
 *     [--kib 32] [--c 16] [--rounds 4] [--seconds 3] [--keep]
 */
import { encodeRequest } from "../../http_conn.ts";
import { LONG_MODEL, startGateway } from "../../gateway_setup.ts";
import { pinSelf, schedCpuMs, spawnPinned } from "../../processes.ts";
import { median } from "../../stats.ts";
import { numFlag, strFlag } from "../../standalone.ts";
import { promptBody, rawClosedLoop } from "../../prompt_size.ts";
import { GATEWAY_V8_FLAGS } from "../../../enclave/build_args.ts";

await pinSelf(1);
const kib = numFlag("kib", 32);
const conc = numFlag("c", 16);
const rounds = numFlag("rounds", 4);
const seconds = numFlag("seconds", 3);
const extra = strFlag("flags", "");
if (extra === "") throw new Error("--flags is required (V8 flags to add, comma-separated)");
const dir = await Deno.makeTempDir({ prefix: "gateway-v8-ab-" });
const mock = await spawnPinned(
  1,
  ["run", "-A", "bench/mock_upstream.ts"],
  /mock listening on (\S+)/,
);
const limits = { body_bytes_in_flight_per_key: 64 * 1024 * 1024 };
const base = [...GATEWAY_V8_FLAGS, "--trace-gc"];
const sides = [
  { name: "default", flags: base },
  { name: extra, flags: [...base, extra] },
].map((s) => ({ ...s, dir: `${dir}/${s.flags.length}` }));
for (const s of sides) await Deno.mkdir(s.dir, { recursive: true });
const gws = await Promise.all(sides.map((s) =>
  startGateway(
    s.dir,
    mock.url,
    0,
    [`--v8-flags=${s.flags.join(",")}`],
    undefined,
    {},
    `${s.dir}/stdout.txt`,
    limits,
  )
));
/** Milliseconds of GC pauses `--trace-gc` printed so far, in all and by kind. */
const gcByKind = (file: string): Map<string, number> => {
  const by = new Map<string, number>([["all", 0]]);
  const lines = Deno.readTextFileSync(file).matchAll(
    /ms: ([A-Za-z][A-Za-z -]*?) [\d.]+ \(.*?MB, ([\d.]+) \/ [\d.]+ ms/g,
  );
  for (const m of lines) {
    by.set("all", by.get("all")! + Number(m[2]));
    by.set(m[1], (by.get(m[1]) ?? 0) + Number(m[2]));
  }
  return by;
};
const gcMs = (file: string): number => gcByKind(file).get("all")!;
const run = async (gw: (typeof gws)[number], s: number) => {
  const req = encodeRequest(new URL("/v1/chat/completions", gw.url), {
    headers: { "content-type": "application/json", authorization: `Bearer ${gw.key}` },
    body: promptBody(LONG_MODEL, kib),
  });
  return (await rawClosedLoop(req, gw.url, conc, s)).ok;
};
const cpu: number[][] = sides.map(() => []);
const gc: number[][] = sides.map(() => []);
try {
  for (const gw of gws) await run(gw, 2);
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 ? [1, 0] : [0, 1];
    for (const i of order) {
      const out = `${sides[i].dir}/stdout.txt`;
      const c0 = schedCpuMs(gws[i].pid);
      const g0 = gcMs(out);
      const ok = await run(gws[i], seconds);
      cpu[i].push(((schedCpuMs(gws[i].pid) - c0) * 1000) / ok);
      gc[i].push(((gcMs(out) - g0) * 1000) / ok);
      console.log(
        `round ${r + 1} ${sides[i].name}: ${ok} requests, ${cpu[i].at(-1)!.toFixed(0)} µs CPU, ` +
          `${gc[i].at(-1)!.toFixed(0)} µs GC pauses per request`,
      );
    }
  }
  for (const i of [0, 1]) {
    console.log(
      `${kib} KiB c=${conc} ${sides[i].name}: median ${median(cpu[i]).toFixed(0)} µs CPU, ` +
        `${median(gc[i]).toFixed(0)} µs GC pauses per request`,
    );
  }
  for (const i of [0, 1]) {
    const kinds = [...gcByKind(`${sides[i].dir}/stdout.txt`)].map(([k, ms]) =>
      `${k} ${ms.toFixed(0)} ms`
    );
    console.log(`${sides[i].name}: GC pauses over the whole run by kind: ${kinds.join(", ")}`);
  }
  const paired = cpu[1].map((v, k) => v / cpu[0][k]);
  console.log(
    `paired CPU ratios (${extra} / default): ${paired.map((x) => x.toFixed(3)).join(" ")}`,
  );
} finally {
  for (const gw of gws) await gw.stop();
  await mock.stop();
  if (Deno.args.includes("--keep")) console.log(`kept ${dir} (each side's stdout.txt)`);
  else await Deno.remove(dir, { recursive: true });
}
