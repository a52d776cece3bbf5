/**
 * The host supervisor of `serve.workers` > 1 (docs/decisions/workers.md): it
 * starts N gateway worker processes with the same command line, hands each
 * its worker spec on stdin (kept open: its end tells a worker the supervisor
 * is gone), restarts a worker that dies after it was ready, forwards SIGTERM
 * and SIGINT (drain) and SIGHUP (reload), and exits once every worker has.
 * It never touches a request: the kernel spreads connections over the
 * workers' listeners (SO_REUSEPORT). main.ts passes in the processes,
 * signals, clock and output it may not reach.
 */
import { hexToBytes } from "../aci/mod.ts";
import type { HostWorker } from "./assemble.ts";

/** What one worker is told at start (one JSON line on its stdin). */
export interface WorkerSpec {
  /** This host's id (random per supervisor): the workers' replica ids start with it. */
  host: string;
  index: number;
  count: number;
  /** Listener ports resolved by the supervisor (a configured 0 becomes one port for all). */
  ports: { base: number; tee?: number };
  /** Hex secrets the workers of one host share: the E2EE key seed and the cache-salt secret. */
  e2eeSeed: string;
  cacheSalt: string;
}

export interface WorkerProcess {
  readonly pid: number;
  /** Resolves with the exit code once the process is gone and its output relayed. */
  readonly exited: Promise<number>;
  /** Resolves once the worker printed its keyset digest (it serves); never if it dies first. */
  readonly ready: Promise<void>;
  kill(signal: "SIGTERM" | "SIGHUP" | "SIGKILL"): void;
}

export interface SupervisorIo {
  spawn(spec: WorkerSpec): WorkerProcess;
  onSignal(signal: "SIGTERM" | "SIGINT" | "SIGHUP", f: () => void): void;
  delay(ms: number): Promise<void>;
  /** Monotonic ms. */
  now(): number;
  print(line: string): void;
  exit(code: number): void;
}

/** Restart back-off: a worker dying soon after its start waits longer each time (at most 5 s). */
const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5_000;
/** A worker that served this long before dying restarts at once. */
const STABLE_MS = 10_000;

export interface Supervisor {
  /** The live worker of each slot (tests and logs). */
  workers(): (WorkerProcess | null)[];
  /** Resolves once every worker was ready once; rejects when one died before it was. */
  ready: Promise<void>;
  /** Restarts so far. */
  restarts(): number;
}

/**
 * Runs `count` workers until a signal stops them. A worker that exits before
 * it was ever ready (a bad configuration, a port in use) stops the host with
 * its exit code, as a single process would have.
 */
export function supervise(
  count: number,
  spec: (index: number) => WorkerSpec,
  io: SupervisorIo,
): Supervisor {
  const slots: (WorkerProcess | null)[] = new Array(count).fill(null);
  let stopping = false;
  let restarts = 0;
  let failed = false;
  const stopAll = (signal: "SIGTERM") => {
    for (const w of slots) w?.kill(signal);
  };
  const finish = async (code: number) => {
    // Every worker's own drain (10 s grace) runs; the host exits after the last.
    await Promise.all(slots.map((w) => w?.exited));
    io.exit(code);
  };
  const start = (index: number, backoffMs: number): Promise<void> => {
    const w = io.spawn(spec(index));
    slots[index] = w;
    const startedAt = io.now();
    let wasReady = false;
    const ready = w.ready.then(() => {
      wasReady = true;
    });
    w.exited.then(async (code) => {
      if (slots[index] === w) slots[index] = null;
      if (stopping) return;
      if (!wasReady) {
        if (failed) return;
        failed = true;
        stopping = true;
        // No line of its own: the worker's last line (relayed) says why, as one process's would.
        stopAll("SIGTERM");
        await finish(code === 0 ? 1 : code);
        return;
      }
      const quick = io.now() - startedAt < STABLE_MS;
      const wait = quick ? backoffMs : 0;
      io.print(`worker ${index} (pid ${w.pid}) exited (${code}); restarting in ${wait} ms`);
      if (wait > 0) await io.delay(wait);
      if (stopping) return;
      restarts++;
      void start(index, quick ? Math.min(BACKOFF_MAX_MS, backoffMs * 2) : BACKOFF_MIN_MS);
    });
    return ready;
  };
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    io.print(`${signal}: draining ${count} workers`);
    stopAll("SIGTERM");
    void finish(0);
  };
  io.onSignal("SIGTERM", () => stop("SIGTERM"));
  io.onSignal("SIGINT", () => stop("SIGINT"));
  io.onSignal("SIGHUP", () => {
    for (const w of slots) w?.kill("SIGHUP");
  });
  // Never resolves when a worker fails to start: the host then exits with its code.
  const ready = Promise.all(Array.from({ length: count }, (_, i) => start(i, BACKOFF_MIN_MS)))
    .then(() => io.print(`${count} workers serving`));
  return { workers: () => [...slots], ready, restarts: () => restarts };
}

/** How many workers serve: `serve.workers` ("auto": the core count); one outside Linux. */
export function workerCount(
  configured: number | "auto",
  cores: number,
  os: string,
): { count: number; note?: string } {
  const want = configured === "auto" ? Math.max(1, cores) : configured;
  if (want > 1 && os !== "linux") {
    return {
      count: 1,
      note: `serve.workers: one worker on ${os} (the kernel spreads one port over ` +
        "several processes on Linux only)",
    };
  }
  return { count: want };
}

const HEX = /^[0-9a-f]+$/;

/** The supervisor's line, checked (null when malformed). */
export function parseWorkerSpec(line: string): WorkerSpec | null {
  let v: Partial<WorkerSpec>;
  try {
    v = JSON.parse(line);
  } catch {
    return null;
  }
  const int = (n: unknown, min: number) => Number.isInteger(n) && (n as number) >= min;
  const ok = typeof v === "object" && v !== null &&
    typeof v.host === "string" && HEX.test(v.host) &&
    int(v.count, 1) && int(v.index, 0) && v.index! < v.count! &&
    typeof v.ports === "object" && v.ports !== null && int(v.ports.base, 1) &&
    (v.ports.tee === undefined || int(v.ports.tee, 1)) &&
    typeof v.e2eeSeed === "string" && /^[0-9a-f]{64}$/.test(v.e2eeSeed) &&
    typeof v.cacheSalt === "string" && /^[0-9a-f]{64}$/.test(v.cacheSalt);
  return ok ? v as WorkerSpec : null;
}

/** What assembleGateway is told about its host. */
export function hostWorker(spec: WorkerSpec): HostWorker {
  return {
    host: spec.host,
    index: spec.index,
    count: spec.count,
    e2eeSeed: hexToBytes(spec.e2eeSeed),
    cacheSalt: hexToBytes(spec.cacheSalt),
  };
}
