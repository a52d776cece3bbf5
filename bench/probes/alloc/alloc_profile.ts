/**
 * Where the gateway's heap allocation comes from: V8's sampling heap profiler
 * (through the inspector, `HeapProfiler.startSampling` with the objects later
 * collected kept in the profile) on a gateway driven with non-streamed chat of
 * one prompt size at `--c`; bytes allocated per request by allocating function
 * (self) and by project function (inclusive), for a load's window only.
 *
 *   deno run -A bench/probes/alloc/alloc_profile.ts [--kib 1] [--c 32] [--seconds 4] [--top 30]
 */
import { encodeRequest } from "../../http_conn.ts";
import { LONG_MODEL, startGateway } from "../../gateway_setup.ts";
import { pinSelf, ROOT, spawnPinned } from "../../processes.ts";
import { numFlag } from "../../standalone.ts";
import { type CallFrame, label } from "../../cpu_profile.ts";
import { promptBody, rawClosedLoop } from "../../prompt_size.ts";

interface SamplingNode {
  callFrame: CallFrame;
  selfSize: number;
  children: SamplingNode[];
}

await pinSelf(1);
const kib = numFlag("kib", 1);
const conc = numFlag("c", 32);
const seconds = numFlag("seconds", 4);
const topN = numFlag("top", 30);
const port = 9300 + Math.floor(Math.random() * 500);
const dir = await Deno.makeTempDir({ prefix: "gateway-alloc-" });
const mock = await spawnPinned(
  1,
  ["run", "-A", "bench/mock_upstream.ts"],
  /mock listening on (\S+)/,
);
const gw = await startGateway(
  dir,
  mock.url,
  0,
  [`--inspect=127.0.0.1:${port}`],
  undefined,
  {},
  undefined,
  {
    body_bytes_in_flight_per_key: 64 * 1024 * 1024,
  },
);

/** A minimal Chrome DevTools Protocol client over the inspector's WebSocket. */
async function connect(): Promise<(method: string, params?: object) => Promise<unknown>> {
  const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json() as {
    webSocketDebuggerUrl: string;
  }[];
  const ws = new WebSocket(list[0].webSocketDebuggerUrl);
  await new Promise((r, j) => {
    ws.onopen = r;
    ws.onerror = j;
  });
  let id = 0;
  const waiting = new Map<number, (v: unknown) => void>();
  ws.onmessage = (e) => {
    const m = JSON.parse(String(e.data)) as { id?: number; result?: unknown; error?: unknown };
    if (m.id !== undefined) {
      if (m.error) throw new Error(JSON.stringify(m.error));
      waiting.get(m.id)?.(m.result);
      waiting.delete(m.id);
    }
  };
  return (method, params = {}) =>
    new Promise((r) => {
      const n = ++id;
      waiting.set(n, r);
      ws.send(JSON.stringify({ id: n, method, params }));
    });
}

const req = encodeRequest(new URL("/v1/chat/completions", gw.url), {
  headers: { "content-type": "application/json", authorization: `Bearer ${gw.key}` },
  body: promptBody(LONG_MODEL, kib),
});
const run = async (s: number) => (await rawClosedLoop(req, gw.url, conc, s)).ok;

try {
  const cdp = await connect();
  await run(2);
  await cdp("HeapProfiler.enable");
  await cdp("HeapProfiler.startSampling", {
    samplingInterval: 512,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  const ok = await run(seconds);
  const { profile } = await cdp("HeapProfiler.stopSampling") as { profile: { head: SamplingNode } };
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  let total = 0;
  const walk = (n: SamplingNode, stack: string[]) => {
    const l = label(n.callFrame, ROOT);
    const own = n.callFrame.url.startsWith(`file://${ROOT}src/`) ? [...stack, l] : stack;
    if (n.selfSize > 0) {
      total += n.selfSize;
      self.set(l, (self.get(l) ?? 0) + n.selfSize);
      for (const s of new Set(own)) incl.set(s, (incl.get(s) ?? 0) + n.selfSize);
    }
    for (const c of n.children) walk(c, own);
  };
  walk(profile.head, []);
  const per = (b: number) => (b / ok / 1024).toFixed(2);
  console.log(
    `${kib} KiB prompts at c=${conc}: ${ok} requests, ${
      per(total)
    } KB allocated per request (sampled)\n`,
  );
  console.log("By allocating function (self), KB per request:\n");
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, topN)) {
    console.log(`- ${per(v)} ${k}`);
  }
  console.log("\nBy project function (inclusive), KB per request:\n");
  for (const [k, v] of [...incl].sort((a, b) => b[1] - a[1]).slice(0, topN)) {
    console.log(`- ${per(v)} ${k}`);
  }
} finally {
  await gw.stop();
  await mock.stop();
  await Deno.remove(dir, { recursive: true });
}
