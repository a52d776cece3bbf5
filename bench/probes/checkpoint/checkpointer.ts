/**
 * The main thread's handle on the WAL checkpoint thread
 * (`checkpoint_worker.ts`): start it on a local KV file, read its counters,
 * stop it. See the worker's doc for why checkpoints leave the commit path.
 */

/** What the checkpoint thread did so far. */
export interface CheckpointStats {
  /** PASSIVE checkpoints run. */
  runs: number;
  /** Sum over runs of the WAL frames backfilled (a frame can count in several runs). */
  framesCopied: number;
  /** Runs that could not finish because a reader or writer held the WAL's end. */
  busy: number;
  errors: number;
  /** Longest single run, ms (on the checkpoint thread, not on a commit). */
  maxMs: number;
  /**
   * Longest WAL seen, frames. Below SQLite's auto-checkpoint threshold (1,000)
   * no commit ran a checkpoint (as far as the polls saw).
   */
  maxWalFrames: number;
}

export interface Checkpointer {
  stats(): Promise<CheckpointStats>;
  /** Runs a last checkpoint, closes the thread's connection and ends the thread. */
  stop(): Promise<void>;
}

/** Where the worker module is; the caller creates the thread (main.ts owns the environment). */
export const CHECKPOINT_WORKER_URL = new URL("./checkpoint_worker.ts", import.meta.url).href;

/**
 * Whether a store path names a local SQLite file a second connection can
 * open (not in-memory, not a KV Connect URL).
 */
export function isLocalStorePath(path: string | undefined): path is string {
  return path !== undefined && path !== "" && path !== ":memory:" &&
    !/^[a-z][a-z0-9+.-]*:\/\//i.test(path);
}

/**
 * Starts checkpointing `path` on `worker` (a fresh module Worker of
 * {@link CHECKPOINT_WORKER_URL}): every `intervalMs` it reads the WAL's length
 * and checkpoints once `frames` frames are waiting.
 */
export function startCheckpointer(
  worker: Worker,
  path: string,
  opts: { intervalMs?: number; frames?: number } = {},
): Promise<Checkpointer> {
  const intervalMs = opts.intervalMs ?? 5;
  const frames = opts.frames ?? 500;
  if (!(intervalMs > 0) || !Number.isInteger(frames) || frames < 1 || frames >= 1000) {
    throw new RangeError("checkpointer: intervalMs > 0 and frames in 1..999");
  }
  const next = () =>
    new Promise<unknown>((resolve) => {
      worker.addEventListener("message", (e) => resolve(e.data), { once: true });
    });
  // A worker that fails to load reports an error event, never a message.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const started = Promise.race([
    next(),
    new Promise<unknown>((resolve) => {
      worker.addEventListener("error", (e) => {
        e.preventDefault();
        resolve({ error: e.message });
      }, { once: true });
      timer = setTimeout(() => resolve({ error: "no answer in 10 s" }), 10_000);
    }),
  ]).finally(() => clearTimeout(timer));
  worker.postMessage({ path, intervalMs, frames });
  return started.then((m) => {
    if (m !== "started") {
      worker.terminate();
      const why = typeof m === "object" && m !== null && "error" in m ? String(m.error) : "";
      throw new Error(`WAL checkpoint thread did not start: ${why}`);
    }
    let stopped = false;
    return {
      async stats() {
        if (stopped) {
          return { runs: 0, framesCopied: 0, busy: 0, errors: 0, maxMs: 0, maxWalFrames: 0 };
        }
        const p = next();
        worker.postMessage("stats");
        return await p as CheckpointStats;
      },
      async stop() {
        if (stopped) return;
        stopped = true;
        const p = next();
        worker.postMessage("stop");
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([p, new Promise((r) => (timer = setTimeout(r, 2000)))]);
        clearTimeout(timer);
        worker.terminate();
      },
    };
  });
}
