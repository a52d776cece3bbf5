/**
 * What a lone request pays that a batched one does not (#27), counted per
 * request on the real gateway and on the receipt floor, at c=1, at c=32 and
 * open-loop at 500 req/s: KV commits and their mutations, KV reads, timers
 * armed and cleared, microtasks queued, stdout writes (counters_preload.ts,
 * preloaded into the server), bytes allocated and promoted (V8's
 * `--trace-gc-nvp`), server CPU (/proc), and at c=1 the gateway's own phases
 * from its `Server-Timing` (admission, upstream, durable commit).
 *
 *   deno run -A bench/probes/lone/lone_probe.ts [--seconds S] [--rounds N] [--stacks]
 */
import { chatBody } from "../../load.ts";
import { encodeRequest, HttpConn } from "../../http_conn.ts";
import { closedLoop, openLoop, type Target } from "../../load.ts";
import { gatewayModel, startGateway } from "../../gateway_setup.ts";
import { cpuMs, pinSelf, ROOT, type Server, spawnPinned } from "../../processes.ts";
import { median, percentile } from "../../stats.ts";
import { numFlag } from "../../standalone.ts";
import { sleep } from "../../../src/store/transient.ts";

const PRELOAD = `--preload=${ROOT}bench/probes/lone/counters_preload.ts`;
const GC = "--v8-flags=--trace-gc-nvp";

interface Probed {
  name: string;
  server: Server;
  /** V8's GC trace (the server's stdout) and the counters' snapshots. */
  out: string;
  probeFile: string;
  target: Target;
}

interface Snapshot {
  t: number;
  counts: Record<string, number>;
  cpu: number;
  /** Voluntary context switches (a thread went to sleep waiting), per thread name. */
  switches: Map<string, number>;
}

/** Voluntary context switches of each thread of `pid`, summed by thread name. */
function switchesOf(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of Deno.readDirSync(`/proc/${pid}/task`)) {
    try {
      const st = Deno.readTextFileSync(`/proc/${pid}/task/${e.name}/status`);
      const name = st.match(/^Name:\s*(.*)$/m)?.[1] ?? "?";
      const v = Number(st.match(/^voluntary_ctxt_switches:\s*(\d+)/m)?.[1] ?? 0);
      out.set(name, (out.get(name) ?? 0) + v);
    } catch {
      // the thread ended
    }
  }
  return out;
}

/** Asks the server for its counters (SIGUSR2) and waits for the line. */
async function snapshot(p: Probed): Promise<Snapshot> {
  const have = (await Deno.readTextFile(p.probeFile).catch(() => "")).split("\n").length;
  Deno.kill(p.server.pid, "SIGUSR2");
  for (let i = 0; i < 400; i++) {
    const lines = (await Deno.readTextFile(p.probeFile).catch(() => "")).split("\n");
    if (lines.length > have) {
      const s = JSON.parse(lines[lines.length - 2]);
      return { ...s, cpu: cpuMs(p.server.pid), switches: switchesOf(p.server.pid) };
    }
    await sleep(10);
  }
  throw new Error(`${p.name}: no counters`);
}

interface Gc {
  t: number;
  allocated: number;
  promoted: number;
  pause: number;
  mark: boolean;
}

/** V8's `--trace-gc-nvp` lines: time since the isolate started (ms) and the event. */
function gcEvents(text: string): Gc[] {
  const out: Gc[] = [];
  for (const l of text.split("\n")) {
    const m = l.match(/^\[[^\]]*\]\s+([\d.]+) ms: GC: (\{.*\})\s*$/);
    if (!m) continue;
    try {
      const j = JSON.parse(m[2]);
      out.push({
        t: Number(m[1]),
        allocated: j.allocated ?? 0,
        promoted: j.promoted ?? 0,
        pause: j.pause ?? 0,
        mark: j.gc !== "s",
      });
    } catch {
      // a line cut by an interleaved write
    }
  }
  return out;
}

/** c=1 with the raw client, keeping every Server-Timing phase. */
async function loneLoop(t: Target, seconds: number) {
  const url = new URL("/v1/chat/completions", t.base);
  const req = encodeRequest(url, {
    headers: { "content-type": "application/json", ...t.headers },
    body: chatBody(t.model("chat"), false),
  });
  const c = await HttpConn.open(url);
  const phases = new Map<string, number[]>();
  const latencies: number[] = [];
  let ok = 0;
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    const t0 = performance.now();
    const res = await c.request(req);
    latencies.push(performance.now() - t0);
    if (res.status === 200) ok++;
    for (const part of (res.serverTiming ?? "").split(",")) {
      const m = part.trim().match(/^([\w-]+);dur=([\d.]+)/);
      if (m) (phases.get(m[1]) ?? phases.set(m[1], []).get(m[1])!).push(Number(m[2]));
    }
  }
  c.close();
  return { ok, latencies, phases };
}

async function main() {
  const seconds = numFlag("seconds", 3);
  const rounds = numFlag("rounds", 2);
  // Attribution of timers and KV calls to their callers (slower: a stack per call).
  const stackEnv: Record<string, string> = Deno.args.includes("--stacks")
    ? { PROBE_STACKS: "1" }
    : {};
  await pinSelf(1);
  const dir = await Deno.makeTempDir({ prefix: "lone-probe-" });
  const servers: Server[] = [];
  try {
    const mock = await spawnPinned(
      1,
      ["run", "-A", "bench/mock_upstream.ts"],
      /mock listening on (\S+)/,
    );
    servers.push(mock);
    const gwOut = `${dir}/gateway.out`;
    const gw = await startGateway(dir, mock.url, 0, [PRELOAD, GC], undefined, {
      PROBE_FILE: `${dir}/gateway.probe`,
      ...stackEnv,
    }, gwOut);
    servers.push(gw);
    const floorOut = `${dir}/floor.out`;
    const floor = await spawnPinned(
      0,
      ["run", "-A", PRELOAD, GC, "bench/receipt_floor.ts", mock.url, `${dir}/floor.kv`],
      /floor listening on (\S+)/,
      { stdoutTo: floorOut, env: { PROBE_FILE: `${dir}/floor.probe`, ...stackEnv } },
    );
    servers.push(floor);
    const probed: Probed[] = [
      {
        name: "gateway",
        server: gw,
        out: gwOut,
        probeFile: `${dir}/gateway.probe`,
        target: {
          base: gw.url,
          headers: { authorization: `Bearer ${gw.key}` },
          model: gatewayModel,
        },
      },
      {
        name: "floor",
        server: floor,
        out: floorOut,
        probeFile: `${dir}/floor.probe`,
        target: { base: floor.url, headers: {}, model: (m) => m },
      },
    ];
    for (const p of probed) await closedLoop(p.target, { concurrency: 32, seconds: 2 });
    type Acc = Map<string, number[]>;
    const acc = new Map<string, Acc>();
    const push = (k: string, m: string, v: number) => {
      const a = acc.get(k) ?? acc.set(k, new Map()).get(k)!;
      (a.get(m) ?? a.set(m, []).get(m)!).push(v);
    };
    const windows: { p: Probed; k: string; t0: number; t1: number; ok: number }[] = [];
    const loads = ["c=1", "c=32", "500/s"] as const;
    for (let r = 0; r < rounds; r++) {
      for (const p of r % 2 ? [...probed].reverse() : probed) {
        for (const load of loads) {
          const s0 = await snapshot(p);
          let ok: number;
          let lat: number[];
          const k = `${p.name} ${load}`;
          if (load === "c=1") {
            const res = await loneLoop(p.target, seconds);
            ok = res.ok;
            lat = res.latencies;
            for (const [ph, v] of res.phases) push(k, `phase ${ph} p50 ms`, median(v));
          } else if (load === "c=32") {
            const res = await closedLoop(p.target, { concurrency: 32, seconds });
            ok = res.ok;
            lat = res.latencies;
          } else {
            const res = await openLoop(p.target, { rate: 500, seconds });
            ok = res.ok;
            lat = res.latencies;
            push(k, "p99 ms", percentile(lat, 99));
          }
          const s1 = await snapshot(p);
          windows.push({ p, k, t0: s0.t, t1: s1.t, ok });
          push(k, "requests", ok);
          push(k, "p50 ms", median(lat));
          push(k, "CPU µs/req", ((s1.cpu - s0.cpu) * 1000) / ok);
          let sw = 0;
          for (const [name, v] of s1.switches) {
            const d = v - (s0.switches.get(name) ?? 0);
            sw += d;
            push(k, `sleeps (voluntary switches) of thread ${name}`, d / ok);
          }
          push(k, "sleeps (voluntary switches), all threads", sw / ok);
          const keys = new Set([...Object.keys(s0.counts), ...Object.keys(s1.counts)]);
          for (const c of [...keys].sort()) {
            push(k, c, ((s1.counts[c] ?? 0) - (s0.counts[c] ?? 0)) / ok);
          }
          console.error(`[probe] round ${r + 1} ${k}: ${ok} ok`);
        }
      }
    }
    // GC lines reach the file only as the servers' stdio buffers flush: read them after exit.
    for (const s of servers.splice(1).reverse()) await s.stop();
    await sleep(500);
    for (const w of windows) {
      const ev = gcEvents(await Deno.readTextFile(w.p.out)).filter((e) =>
        e.t > w.t0 && e.t <= w.t1
      );
      const sum = (f: (e: Gc) => number) => ev.reduce((a, e) => a + f(e), 0);
      push(w.k, "allocated KB/req", sum((e) => e.allocated) / 1024 / w.ok);
      push(w.k, "promoted KB/req", sum((e) => e.promoted) / 1024 / w.ok);
      push(w.k, "GC pause µs/req", (sum((e) => e.pause) * 1000) / w.ok);
      push(w.k, "mark-compacts in window", ev.filter((e) => e.mark).length);
      push(w.k, "max GC pause ms", Math.max(0, ...ev.map((e) => e.pause)));
    }
    const names = [...acc.keys()];
    const metrics = [...new Set(names.flatMap((n) => [...acc.get(n)!.keys()]))];
    console.log(
      `| per request (median of ${rounds} rounds of ${seconds} s) | ${names.join(" | ")} |`,
    );
    console.log(`|---|${names.map(() => "---:").join("|")}|`);
    for (const m of metrics) {
      const cells = names.map((n) => {
        const v = acc.get(n)!.get(m);
        if (!v) return "–";
        const x = median(v);
        return Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toFixed(2) : x.toFixed(3);
      });
      console.log(`| ${m} | ${cells.join(" | ")} |`);
    }
    console.log(`\nload average ${Deno.readTextFileSync("/proc/loadavg").trim()}`);
  } finally {
    for (const s of servers.reverse()) await s.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) await main();
