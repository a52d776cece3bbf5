/**
 * SQLite's transient write-contention errors, and the one retry rule for
 * them. Several processes share one KV file (replicas, the keys CLI next to a
 * running gateway); any of them can see `database is locked` for a moment,
 * even on a read-modify-write that does not conflict. Every direct commit
 * outside the group committer goes through {@link retryTransient}.
 */

/** Errors SQLite raises under write contention; worth retrying. */
export function isTransientKvError(e: unknown): boolean {
  const msg = e instanceof Error ? e.message : String(e);
  return /database is locked|database is busy|SQLITE_BUSY|SQLITE_LOCKED/i.test(msg);
}

/** Short random backoff: up to 1, 2, 4 … 32 ms, jittered so two processes desynchronise. */
export function backoffMs(attempt: number, random: () => number): number {
  const cap = Math.min(32, 2 ** Math.min(attempt - 1, 5));
  return 0.5 + random() * cap;
}

/**
 * Resolves after `ms`; with a signal, rejects with its reason when it aborts
 * first and leaves no timer behind. The one sleep of the code base: retry
 * backoffs use it by default, the demo upstreams, tests and the bench too.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal === undefined) return new Promise((resolve) => setTimeout(resolve, ms));
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export interface RetryOptions {
  /** Attempts before a transient error is thrown as it is (default 50). */
  maxAttempts?: number;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * Runs `attempt` again, after a jittered backoff, while it fails with a
 * transient SQLite error. The whole attempt is rerun (reads included), so it
 * must be a self-contained read-check-commit. Any other error is thrown at once.
 */
export async function retryTransient<T>(
  attempt: () => Promise<T>,
  opts: RetryOptions = {},
): Promise<T> {
  const max = opts.maxAttempts ?? 50;
  const random = opts.random ?? Math.random;
  const wait = opts.sleep ?? sleep;
  for (let n = 1;; n++) {
    try {
      return await attempt();
    } catch (e) {
      if (!isTransientKvError(e) || n >= max) throw e;
      await wait(backoffMs(n, random));
    }
  }
}
