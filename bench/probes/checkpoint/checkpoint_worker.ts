/**
 * A thread's entry point (like main.ts for the main thread): keeps SQLite's
 * WAL checkpoints out of Deno KV commits.
 *
 * Deno KV runs SQLite in WAL mode with the default auto-checkpoint: the commit
 * that takes the WAL past 1,000 frames also copies them into the database
 * file and fsyncs it, inside that commit, so every request waiting on it
 * waits for the checkpoint too (bench/RESULTS.md, "What sets the tail").
 * Deno KV has no setting for this. This worker opens the same file through
 * `node:sqlite`, reads the WAL's length every few milliseconds and runs a
 * PASSIVE checkpoint while it is past `frames` (below 1,000) and not wholly
 * copied: a PASSIVE checkpoint never blocks a writer (SQLite lets commits
 * append to the WAL meanwhile), and the WAL then restarts before the
 * auto-checkpoint threshold is reached, so the copying and the database
 * fsync happen on this thread. Nothing is read or written here but the
 * checkpoint; the connection holds no transaction between checkpoints (so
 * the WAL can restart from its start).
 *
 * Not started by the gateway yet: it runs more, smaller checkpoints than
 * SQLite would, and whether that wins on the p99 is not settled
 * (README.md beside this file; `commit_tail.ts`).
 *
 * Protocol: the parent posts `{ path, intervalMs, frames }` once; then `"stats"`
 * answers {@link CheckpointStats}; `"stop"` closes the database and answers
 * `"stopped"`.
 */
import { DatabaseSync } from "node:sqlite";
import type { CheckpointStats } from "./checkpointer.ts";

interface Start {
  path: string;
  /** How often the WAL's length is read. */
  intervalMs: number;
  /** Frames not yet checkpointed that start a checkpoint (below SQLite's auto-checkpoint at 1,000). */
  frames: number;
}

interface WorkerScope {
  postMessage(m: unknown): void;
  addEventListener(type: "message", f: (e: MessageEvent) => void): void;
  close(): void;
}

const scope = globalThis as unknown as WorkerScope;
let db: DatabaseSync | null = null;
let shm: Deno.FsFile | null = null;
let threshold = 500;
let timer: ReturnType<typeof setInterval> | undefined;
/** New frames worth another checkpoint of a long WAL. */
const CATCH_UP_FRAMES = 64;
/** Past this the next commits would reach SQLite's own checkpoint (1,000): checkpoint anyway. */
const URGENT_FRAMES = 900;
const header = new Uint8Array(100);
const view = new DataView(header.buffer);

/**
 * Whether a checkpoint is due, from the WAL index (`-shm`): `mxFrame` (the
 * WAL's length) at byte 16 of its header, `nBackfill` (frames already
 * copied) at byte 96 (SQLite's documented file format, native byte order).
 * Due once the WAL is `threshold` frames long and not wholly copied: the WAL
 * only restarts from its start after a checkpoint that copied every frame,
 * so a long WAL gets checkpointed again (each time once 64 new frames are
 * waiting, or at once past 900) until one catches up between commits. Reading costs one pread and takes no lock;
 * a torn read only makes one poll early or late. No index yet counts as due.
 */
function due(): boolean {
  if (shm === null) return true;
  try {
    shm.seekSync(0, Deno.SeekMode.Start);
    if (shm.readSync(header) !== header.length) return false;
  } catch {
    return true;
  }
  const mxFrame = view.getUint32(16, true);
  const backfilled = view.getUint32(96, true);
  if (mxFrame > stats.maxWalFrames) stats.maxWalFrames = mxFrame;
  if (mxFrame < threshold || backfilled >= mxFrame) return false;
  // Catching up a few frames at a time costs a database fsync each: wait for a
  // batch of new frames, unless the WAL nears the auto-checkpoint mark.
  return mxFrame - backfilled >= CATCH_UP_FRAMES || mxFrame >= URGENT_FRAMES;
}

function poll(): void {
  if (due()) checkpoint();
}
const stats: CheckpointStats = {
  runs: 0,
  framesCopied: 0,
  busy: 0,
  errors: 0,
  maxMs: 0,
  maxWalFrames: 0,
};

function checkpoint(): void {
  if (db === null) return;
  const t0 = performance.now();
  try {
    const row = db.prepare("PRAGMA wal_checkpoint(PASSIVE)").get() as
      | { busy: number; log: number; checkpointed: number }
      | undefined;
    stats.runs++;
    if (row !== undefined) {
      if (row.busy) stats.busy++;
      // `checkpointed` counts every backfilled frame of the WAL so far; only
      // growth since the last run is new work, but the total is what stays bounded.
      if (row.checkpointed > 0) stats.framesCopied += row.checkpointed;
    }
  } catch {
    // SQLITE_BUSY and the like: the next run tries again; commits checkpoint themselves meanwhile.
    stats.errors++;
  }
  stats.maxMs = Math.max(stats.maxMs, performance.now() - t0);
}

scope.addEventListener("message", (e: MessageEvent) => {
  const m: unknown = e.data;
  if (m === "stats") {
    scope.postMessage({ ...stats });
  } else if (m === "stop") {
    if (timer !== undefined) clearInterval(timer);
    checkpoint();
    db?.close();
    db = null;
    shm?.close();
    shm = null;
    scope.postMessage("stopped");
  } else if (typeof m === "object" && m !== null && "path" in m && db === null) {
    const s = m as Start;
    try {
      db = new DatabaseSync(s.path);
      // A checkpoint waits for no lock it cannot take at once: PASSIVE never
      // blocks, and a zero busy timeout keeps the thread from sleeping in SQLite.
      db.exec("PRAGMA busy_timeout = 0");
      threshold = s.frames;
      try {
        shm = Deno.openSync(`${s.path}-shm`, { read: true });
      } catch {
        shm = null; // no WAL index to read: checkpoint on every poll
      }
      timer = setInterval(poll, s.intervalMs);
      scope.postMessage("started");
    } catch (err) {
      scope.postMessage({ error: err instanceof Error ? err.message : String(err) });
    }
  }
});
