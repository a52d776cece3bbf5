/**
 * A thread's entry point (like main.ts for the main thread): keeps SQLite's
 * WAL checkpoints out of Deno KV commits.
 *
 * Deno KV runs SQLite in WAL mode with the default auto-checkpoint: the commit
 * that takes the WAL past 1,000 frames also copies them into the database
 * file and fsyncs it, inside that commit, so every request waiting on it
 * waits for the checkpoint too (bench/RESULTS.md, "What sets the tail").
 * Deno KV has no setting for this. This worker opens the same file through
 * `node:sqlite` and runs a PASSIVE checkpoint every few milliseconds: it
 * never blocks a writer (SQLite lets commits append to the WAL meanwhile),
 * and because it keeps the WAL short the auto-checkpoint threshold is not
 * reached, so the copying and the database fsync happen on this thread.
 * Nothing is read or written here but the checkpoint; the connection holds
 * no transaction between checkpoints (so the WAL can restart from its start).
 *
 * Protocol: the parent posts `{ path, intervalMs }` once; then `"stats"`
 * answers {@link CheckpointStats}; `"stop"` closes the database and answers
 * `"stopped"`.
 */
import { DatabaseSync } from "node:sqlite";
import type { CheckpointStats } from "./checkpointer.ts";

interface Start {
  path: string;
  intervalMs: number;
}

interface WorkerScope {
  postMessage(m: unknown): void;
  addEventListener(type: "message", f: (e: MessageEvent) => void): void;
  close(): void;
}

const scope = globalThis as unknown as WorkerScope;
let db: DatabaseSync | null = null;
let timer: number | undefined;
const stats: CheckpointStats = { runs: 0, framesCopied: 0, busy: 0, errors: 0, maxMs: 0 };

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
    scope.postMessage("stopped");
  } else if (typeof m === "object" && m !== null && "path" in m && db === null) {
    const s = m as Start;
    try {
      db = new DatabaseSync(s.path);
      // A checkpoint waits for no lock it cannot take at once: PASSIVE never
      // blocks, and a zero busy timeout keeps the thread from sleeping in SQLite.
      db.exec("PRAGMA busy_timeout = 0");
      timer = setInterval(checkpoint, s.intervalMs);
      scope.postMessage("started");
    } catch (err) {
      scope.postMessage({ error: err instanceof Error ? err.message : String(err) });
    }
  }
});
