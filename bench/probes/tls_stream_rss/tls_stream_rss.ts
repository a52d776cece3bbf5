/**
 * RSS per open upstream stream, by way of connecting (issue #19: the verified
 * path's memory per held stream), in ~30 s instead of a whole `task bench`.
 *
 * `deno run -A bench/probes/tls_stream_rss/tls_stream_rss.ts [--n 500] [--runs 3] [--modes a,b]`
 *
 * Starts the mock upstream twice (plain, and behind TLS as mock_upstream_tls.ts),
 * then for each mode and run a fresh child process that warms up with 50 held
 * streams, measures itself, opens `n` connections each holding one `hold`
 * stream whose first event it has read, and measures again. Printed per
 * connection (KB, median of the runs): RSS; the JS heap in use; the RSS of
 * the main malloc arena (`[heap]`); glibc's bytes in use and free in its
 * arenas. `GC=1` runs a full GC before each measurement (live objects only;
 * the bench measures without). The modes are listed in bench/probes/tls_stream_rss/tls_stream_modes.ts;
 * `gateway` and `gateway-plain` measure a fresh gateway per run instead,
 * holding `n` streams through its verified or plain path as `task bench` does
 * (`GW_FLAGS` adds a runtime flag to the gateway, e.g.
 * `--v8-flags=--max-semi-space-size=1`). With `EXIT_AT_PEAK=1` a child exits
 * with its connections open, so a heap profiler (heaptrack) lists what they
 * hold as leaks.
 */
import { type Server, spawnPinned } from "../../processes.ts";
import { median } from "../../stats.ts";
import { sleep } from "../../../src/store/transient.ts";
import { measureHeld } from "../../held_rss.ts";
import { gatewayModel, startGateway, verifiedModel } from "../../gateway_setup.ts";
import { type ConnMode, type Held, MODES, opener, type Upstream } from "./tls_stream_modes.ts";

type Mode = ConnMode | "gateway" | "gateway-plain";

const USIZE10 = Array(10).fill("usize") as "usize"[];
let libc:
  | Deno.DynamicLibrary<{ mallinfo2: { parameters: []; result: { struct: "usize"[] } } }>
  | null = null;

/** glibc's malloc figures (bytes in use, free but kept in its arenas); NaN elsewhere. */
function mallinfo(): { used: number; free: number } {
  try {
    libc ??= Deno.dlopen("libc.so.6", {
      mallinfo2: { parameters: [], result: { struct: USIZE10 } },
    });
  } catch {
    return { used: NaN, free: NaN };
  }
  const r = libc.symbols.mallinfo2() as Uint8Array;
  const v = new BigUint64Array(r.buffer, r.byteOffset, 10);
  return { used: Number(v[7] + v[4]), free: Number(v[8]) }; // uordblks + hblkhd, fordblks
}

/** RSS of the main thread's malloc arena (the `[heap]` mapping), bytes. */
function brkRss(): number {
  const smaps = Deno.readTextFileSync("/proc/self/smaps");
  const i = smaps.indexOf("[heap]");
  const m = i < 0 ? null : smaps.slice(i).match(/\nRss:\s+(\d+) kB/);
  return m ? Number(m[1]) * 1024 : NaN;
}

function ownRss(): number {
  const m = Deno.readTextFileSync("/proc/self/status").match(/VmRSS:\s+(\d+)\s+kB/);
  if (!m) throw new Error("no VmRSS");
  return Number(m[1]) * 1024;
}

interface Sample {
  rss: number;
  heap: number;
  brk: number;
  mUsed: number;
  mFree: number;
}

function sample(): Sample {
  // With GC=1 (the child runs with --expose-gc): live objects only.
  (globalThis as { gc?: () => void }).gc?.();
  const m = mallinfo();
  return {
    rss: ownRss(),
    heap: Deno.memoryUsage().heapUsed,
    brk: brkRss(),
    mUsed: m.used,
    mFree: m.free,
  };
}

/** The child: warm up, measure, hold `n`, measure, release; prints the differences. */
async function child(mode: ConnMode, up: Upstream, n: number): Promise<void> {
  const open = opener(mode, up);
  const client = Deno.createHttpClient({ caCerts: [up.caPem] });
  const release = async () => {
    for (const base of [up.url, up.plainUrl]) {
      const r = await fetch(`${base}/release`, { method: "POST", client });
      await r.body?.cancel();
    }
  };
  const cycle = async (k: number, atPeak?: () => void) => {
    const held: Held[] = [];
    for (let i = 0; i < k; i += 50) {
      held.push(...await Promise.all(Array.from({ length: Math.min(50, k - i) }, open)));
    }
    await sleep(500);
    atPeak?.();
    await release();
    await Promise.all(held.map((h) => h.drain()));
  };
  await cycle(50);
  await sleep(1000);
  const idle = sample();
  let peak = idle;
  await cycle(n, () => {
    peak = sample();
    // For heaptrack: what is still allocated at exit is what the open connections hold.
    if (Deno.env.get("EXIT_AT_PEAK")) Deno.exit(0);
  });
  const diff = Object.fromEntries(
    Object.keys(idle).map((k) => [k, (peak[k as keyof Sample] - idle[k as keyof Sample]) / n]),
  );
  console.log(JSON.stringify(diff));
  Deno.exit(0);
}

async function runChild(mode: ConnMode, up: Upstream, n: number): Promise<Sample> {
  const gc = Deno.env.get("GC") ? ["--v8-flags=--expose-gc"] : [];
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ...gc, import.meta.filename!, "--child", mode, JSON.stringify(up), `${n}`],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error(`${mode} child failed`);
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

/** A fresh gateway holding `n` streams through its verified (TLS mock) or plain path. */
async function runGateway(up: Upstream, n: number, dir: string, plain: boolean): Promise<Sample> {
  const sub = await Deno.makeTempDir({ dir, prefix: plain ? "plain-" : "verified-" });
  const flags = Deno.env.get("GW_FLAGS");
  const g = await startGateway(sub, up.plainUrl, 0, flags ? [flags] : [], up);
  const client = Deno.createHttpClient({ caCerts: [up.caPem] });
  try {
    const t = {
      base: g.url,
      headers: { authorization: `Bearer ${g.key}` },
      model: plain ? gatewayModel : verifiedModel,
    };
    const h = await measureHeld(t, g.pid, plain ? up.plainUrl : up.url, n, client);
    return { rss: (h.open - h.idle) / n, heap: NaN, brk: NaN, mUsed: NaN, mFree: NaN };
  } finally {
    client.close();
    await g.stop();
  }
}

function flag(name: string): string | undefined {
  const i = Deno.args.indexOf(`--${name}`);
  return i < 0 ? undefined : Deno.args[i + 1];
}

const kb = (xs: number[]) => (median(xs) / 1024).toFixed(1);

async function main(): Promise<void> {
  const ci = Deno.args.indexOf("--child");
  if (ci >= 0) {
    const [mode, up, n] = Deno.args.slice(ci + 1);
    return child(mode as ConnMode, JSON.parse(up), Number(n));
  }
  const n = Number(flag("n") ?? 500);
  const runs = Number(flag("runs") ?? 3);
  const modes = (flag("modes")?.split(",") ?? Object.keys(MODES)) as Mode[];
  const dir = await Deno.makeTempDir({ prefix: "tls-rss-" });
  const servers: Server[] = [];
  try {
    servers.push(
      await spawnPinned(
        1,
        ["run", "-A", "bench/mock_upstream_tls.ts", `${dir}/tee.json`],
        /mock-tls listening on (\S+)/,
      ),
      await spawnPinned(1, ["run", "-A", "bench/mock_upstream.ts"], /mock listening on (\S+)/),
    );
    const tee = JSON.parse(await Deno.readTextFile(`${dir}/tee.json`));
    const up: Upstream = { ...tee, url: servers[0].url, plainUrl: servers[1].url };
    console.log(
      "mode               KB/conn: RSS   JS heap  [heap]  malloc used  free   (RSS runs)",
    );
    for (const mode of modes) {
      const s: Sample[] = [];
      for (let i = 0; i < runs; i++) {
        s.push(
          mode === "gateway" || mode === "gateway-plain"
            ? await runGateway(up, n, dir, mode === "gateway-plain")
            : await runChild(mode, up, n),
        );
      }
      const col = (k: keyof Sample) => kb(s.map((x) => x[k])).padStart(7);
      console.log(
        `${mode.padEnd(18)} ${col("rss")} ${col("heap")} ${col("brk")} ${col("mUsed")} ${
          col("mFree")
        }   (${s.map((x) => (x.rss / 1024).toFixed(1)).join(", ")})`,
      );
    }
  } finally {
    for (const s of servers) await s.stop();
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) await main();
