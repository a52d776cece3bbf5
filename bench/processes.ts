/**
 * Child processes of the benchmark, each pinned to one core with `taskset`:
 * spawn, learn the listening URL from stderr, read RSS, stop.
 */

export const ROOT = new URL("../", import.meta.url).pathname;

/**
 * `--quick` (#27): start-up is mostly one thread compiling modules, so a server
 * pinned to one core starts on every core and is pinned to its own once it
 * listens (before anything is measured); nothing is measured while servers start.
 */
let startWide = false;
/** Cores of the machine (not this process's affinity: the bench pins itself to one). */
const machineCores = () =>
  Deno.readTextFileSync("/proc/cpuinfo").split("\n").filter((l) => /^processor\s*:/.test(l))
    .length;
export function startOnEveryCore(on: boolean): void {
  startWide = on;
}

/**
 * Starts servers concurrently (`--quick`) or one after another; if one fails, the
 * others are stopped before the error is thrown.
 */
export async function startAll<T extends readonly { stop(): Promise<void> }[]>(
  concurrent: boolean,
  starts: { [K in keyof T]: () => Promise<T[K]> },
): Promise<T> {
  const fns = starts as readonly (() => Promise<{ stop(): Promise<void> }>)[];
  const out: { stop(): Promise<void> }[] = [];
  if (!concurrent) {
    try {
      for (const s of fns) out.push(await s());
    } catch (e) {
      for (const s of out) await s.stop();
      throw e;
    }
    return out as unknown as T;
  }
  const settled = await Promise.allSettled(fns.map((s) => s()));
  for (const r of settled) if (r.status === "fulfilled") out.push(r.value);
  const failed = settled.find((r) => r.status === "rejected");
  if (failed) {
    for (const s of out) await s.stop();
    throw failed.reason;
  }
  return out as unknown as T;
}

/**
 * `--quick`: servers of later sections started while the held streams run (RSS is measured
 * there, not time), then frozen (SIGSTOP: an idle gateway still takes ~1% of a core) until
 * their section takes them, so nothing runs beside the rows measured meanwhile. Keys name a
 * server the way its section asks for it (`take`); a section finding none starts its own.
 */
export class EarlyStarts {
  #started = new Map<string, Promise<Server>>();
  #all: Server[] = [];
  start(key: string, fn: () => Promise<Server>): void {
    const p = fn().then(async (s) => {
      this.#all.push(s);
      await freeze(s.pid);
      return s;
    });
    p.catch(() => {}); // reported by ready()
    this.#started.set(key, p);
  }
  /** Every early start-up done (and frozen); the first failure thrown. */
  async ready(): Promise<void> {
    await Promise.all(this.#started.values());
  }
  /** The server started early under `key`, running again; or `fn()`. */
  async take<T extends Server>(key: string, fn: () => Promise<T>): Promise<T> {
    const p = this.#started.get(key);
    if (!p) return fn();
    this.#started.delete(key);
    const s = await p;
    Deno.kill(s.pid, "SIGCONT");
    // The caller asked for this key with the same recipe (`fn`), so it is a T.
    return s as T;
  }
  /** Stops every early server (thawed first: a frozen one would not see SIGTERM). */
  async stopAll(): Promise<void> {
    await Promise.allSettled(this.#started.values());
    await Promise.all(this.#all.map(async (s) => {
      try {
        Deno.kill(s.pid, "SIGCONT");
      } catch {
        // already gone
      }
      await s.stop();
    }));
  }
}

/**
 * SIGSTOP, but never while the process holds a write lock: a server that has
 * just started may be writing Deno's shared caches (`v8_code_cache_v2` and
 * the others are SQLite files under DENO_DIR, and a fresh checkout rewrites
 * them), and frozen inside that write or a WAL checkpoint it blocked every
 * Deno process started after it (2026-11-29: `--quick` failed with "no start
 * within 60 s"). Stopped first, then checked, so nothing changes in between;
 * thawed and tried again until it holds none (left running if it never lets go).
 */
export async function freeze(pid: number, attempts = 200): Promise<boolean> {
  for (let i = 0; i < attempts; i++) {
    Deno.kill(pid, "SIGSTOP");
    // The signal is delivered asynchronously: check only once it has taken effect.
    await stopped(pid);
    if (!holdsWriteLock(Deno.readTextFileSync("/proc/locks"), pid)) return true;
    Deno.kill(pid, "SIGCONT");
    await new Promise((r) => setTimeout(r, 25));
  }
  return false;
}

/** Resolves once `pid` shows as stopped (state T) in /proc, or after a second. */
export async function stopped(pid: number): Promise<void> {
  for (let i = 0; i < 1000 && stateLetter(pid) !== "T"; i++) {
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** A process's state letter from /proc/<pid>/stat (after the command name's closing paren). */
export function stateLetter(pid: number): string {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  return stat.slice(stat.lastIndexOf(")") + 2)[0];
}

/** Whether `/proc/locks` text lists a write lock held (not waited for) by `pid`. */
export function holdsWriteLock(locks: string, pid: number): boolean {
  for (const line of locks.split("\n")) {
    const f = line.trim().split(/\s+/);
    // "N: POSIX ADVISORY WRITE pid dev:inode start end"; a waiter's line has "->" after "N:".
    if (f[1] === "->") continue;
    if (f[3] === "WRITE" && Number(f[4]) === pid) return true;
  }
  return false;
}

/** `early.take(key, fn)` where there is an `early`; else `fn()`. */
export const takeOr = <T extends Server>(
  early: EarlyStarts | undefined,
  key: string,
  fn: () => Promise<T>,
): Promise<T> => early ? early.take(key, fn) : fn();

export interface Server {
  url: string;
  pid: number;
  stderr: string[];
  stop(): Promise<void>;
}

/**
 * Runs `deno <args>` (or `opts.program <args>`) on core `cpu`; resolves with the URL its
 * stderr announces. A process that has printed nothing at all after {@link SILENT_MS} is
 * killed and started again (twice at most, each said on stderr): on the bench VM a Deno
 * process started beside others sometimes sleeps before its runtime is up (3 threads, in
 * `hrtimer_nanosleep`) for over a minute (2026-11-29, `--quick` runs; cause not found).
 */
export async function spawnPinned(
  cpu: number | string,
  denoArgs: string[],
  ready: RegExp,
  /**
   * `stdoutTo`: a file receiving the process's stdout (e.g. V8's `--trace-gc` lines); else
   * discarded. `silentMs`: {@link SILENT_MS} (tests shorten it).
   */
  opts: SpawnOptions = {},
): Promise<Server> {
  const silentMs = opts.silentMs ?? SILENT_MS;
  for (let attempt = 1;; attempt++) {
    const started = await spawnOnce(cpu, denoArgs, ready, opts, attempt < 3 ? silentMs : null);
    if (started !== "silent") return started;
    console.error(
      `[bench] ${denoArgs.join(" ").slice(0, 120)}: nothing printed in ${silentMs} ms; restarted`,
    );
  }
}

export interface SpawnOptions {
  program?: string;
  cwd?: string;
  env?: Record<string, string>;
  stdoutTo?: string;
  silentMs?: number;
}

/** A start that printed nothing in this long is given up (when a retry is allowed). */
const SILENT_MS = 20_000;

async function spawnOnce(
  cpu: number | string,
  denoArgs: string[],
  ready: RegExp,
  opts: SpawnOptions,
  silentMs: number | null,
): Promise<Server | "silent"> {
  // Only a single core is widened: a list (workers, bench/workers.ts) spawns children later.
  const wide = startWide && typeof cpu === "number";
  const startCpus = wide ? `0-${machineCores() - 1}` : String(cpu);
  const child = new Deno.Command("taskset", {
    args: ["-c", startCpus, opts.program ?? Deno.execPath(), ...denoArgs],
    cwd: opts.cwd ?? ROOT,
    stdin: "null",
    // The gateway logs one JSON line per request: discard rather than let a pipe fill.
    stdout: opts.stdoutTo ? "piped" : "null",
    stderr: "piped",
    env: { NO_COLOR: "1", ...opts.env },
  }).spawn();
  if (opts.stdoutTo) {
    const file = await Deno.open(opts.stdoutTo, { write: true, create: true, truncate: true });
    child.stdout.pipeTo(file.writable).catch(() => {});
  }
  const stderr: string[] = [];
  let heard = false;
  const url = await new Promise<string | "silent">((resolve, reject) => {
    const silent = silentMs !== null
      ? setTimeout(() => {
        if (heard) return;
        clearTimeout(timer);
        try {
          child.kill("SIGKILL");
        } catch {
          // already gone
        }
        resolve("silent");
      }, silentMs)
      : undefined;
    const timer = setTimeout(
      () =>
        reject(
          new Error(
            `no start within 60 s: ${denoArgs.join(" ")} (pid ${child.pid}, ${
              processState(child.pid)
            }):\n${stderr.join("\n")}`,
          ),
        ),
      60_000,
    );
    const done = () => {
      clearTimeout(timer);
      clearTimeout(silent);
    };
    (async () => {
      const dec = new TextDecoder();
      let buf = "";
      for await (const chunk of child.stderr) {
        heard = true;
        buf += dec.decode(chunk, { stream: true });
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (stderr.length < 200) stderr.push(line);
          const m = line.match(ready);
          if (m) {
            done();
            resolve(m[1]);
          }
        }
      }
    })().catch(() => {});
    child.status.then((s) => {
      done();
      reject(new Error(`exited early (${s.code}):\n${stderr.join("\n")}`));
    });
  });
  if (url === "silent") {
    await child.status;
    return "silent";
  }
  if (wide) await pinPid(child.pid, cpu);
  return {
    url,
    pid: child.pid,
    stderr,
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch {
        // already gone
      }
      const killer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {
          // already gone
        }
      }, 15_000);
      await child.status;
      clearTimeout(killer);
    },
  };
}

/** A process's scheduler state and what it waits in (/proc), for a start-up that hangs. */
function processState(pid: number): string {
  try {
    const state = Deno.readTextFileSync(`/proc/${pid}/status`).match(/State:\s+(.+)/)?.[1];
    const wchan = Deno.readTextFileSync(`/proc/${pid}/wchan`);
    const threads = [...Deno.readDirSync(`/proc/${pid}/task`)].length;
    return `state ${state}, wchan ${wchan || "-"}, ${threads} threads`;
  } catch {
    return "gone";
  }
}

/** Resident set size of a process, bytes (`VmRSS` in /proc/<pid>/status). */
export function rssBytes(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/VmRSS:\s+(\d+)\s+kB/);
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

/** Pins this process (all its threads) to `cpu`. */
export function pinSelf(cpu: number): Promise<void> {
  return pinPid(Deno.pid, cpu);
}

/**
 * Pins `pid` and its child processes (a supervisor's workers), all their threads, to `cpu`:
 * for a server started on every core whose children were spawned before it was pinned.
 */
export async function pinTree(pid: number, cpu: number): Promise<void> {
  await pinPid(pid, cpu);
  for (const t of Deno.readDirSync(`/proc/${pid}/task`)) {
    let children = "";
    try {
      children = Deno.readTextFileSync(`/proc/${pid}/task/${t.name}/children`);
    } catch {
      continue; // the thread ended meanwhile
    }
    for (const c of children.trim().split(/\s+/)) if (c !== "") await pinTree(Number(c), cpu);
  }
}

/** Pins process `pid` (all its threads; later ones inherit) to `cpu`. */
async function pinPid(pid: number, cpu: number): Promise<void> {
  const out = await new Deno.Command("taskset", {
    args: ["-a", "-p", "-c", String(cpu), String(pid)],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`taskset failed: ${new TextDecoder().decode(out.stderr)}`);
}

/** Everything the table's header needs to describe this machine. */
export async function machine(): Promise<string> {
  const cpuinfo = Deno.readTextFileSync("/proc/cpuinfo");
  const model = cpuinfo.match(/model name\s*:\s*(.*)/)?.[1] ?? "unknown";
  const mem = Deno.readTextFileSync("/proc/meminfo").match(/MemTotal:\s+(\d+)/)?.[1];
  const nproc = new TextDecoder().decode(
    (await new Deno.Command("nproc", { stdout: "piped" }).output()).stdout,
  ).trim();
  const memGiB = mem ? (Number(mem) / 1024 / 1024).toFixed(1) : "?";
  return `nproc ${nproc}, CPU "${model}", ${memGiB} GiB RAM, Deno ${Deno.version.deno} (V8 ${Deno.version.v8})`;
}

/** utime + stime of a `/proc/…/stat` line, ms (fields 14 and 15, after the command name). */
function statCpuMs(stat: string): number {
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS;
}

/** CPU time (user + system, all threads) a process has used so far, ms. */
export function cpuMs(pid: number): number {
  return statCpuMs(Deno.readTextFileSync(`/proc/${pid}/stat`));
}

/**
 * CPU time of a process's live threads so far, ms, at nanosecond resolution
 * (`schedstat` of each `/proc/<pid>/task/<tid>`): for one request at a time, where the 10 ms
 * ticks of {@link cpuMs} are too coarse. A thread that ended drops out, so
 * only differences over a span no thread ends in are meaningful.
 */
export function schedCpuMs(pid: number): number {
  let ns = 0;
  for (const t of Deno.readDirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(Deno.readTextFileSync(`/proc/${pid}/task/${t.name}/schedstat`).split(" ")[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns / 1e6;
}

/**
 * CPU time per thread group so far, ms: the JS main thread as "main (JS)",
 * other threads by their kernel name (V8 helpers, the KV's SQLite thread, …).
 */
export function threadCpuMs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of Deno.readDirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = Deno.readTextFileSync(`/proc/${pid}/task/${t.name}/stat`);
    } catch {
      continue; // the thread ended meanwhile
    }
    const name = t.name === String(pid)
      ? "main (JS)"
      : stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")).replace(/[-\d]+$/, "");
    out.set(name, (out.get(name) ?? 0) + statCpuMs(stat));
  }
  return out;
}

/** USER_HZ; 100 on every Linux this runs on (`getconf CLK_TCK`). */
const CLOCK_TICKS = 100;
