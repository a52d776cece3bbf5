/**
 * Requests waiting for the log to grow (`GET …/inclusion?wait=`): each one
 * tried its answer, found its receipt not yet in a signed checkpoint, and
 * sleeps here until the log may have changed, its deadline passes, its
 * client goes away or the gateway stops. Two ways the log is seen to grow:
 * this process's own append (the sequencer's `onAppend`: at once), and one
 * shared re-read of the head every `pollMs` while anybody waits (another
 * replica or worker appended; Deno KV's `watch` does not see other
 * processes' writes to the same SQLite file, tested). The re-read is one KV
 * read per interval for all waiters together, and stops when none is left.
 */
import type { After, Deadline } from "../http/mod.ts";

/** How a wait ended: the log may have grown, or it is time to answer 503 after all. */
export type WaitEnd = "changed" | "timeout" | "aborted" | "closed" | "full";

export interface LogWaiters {
  /** Moves whenever the log may have grown: read it before an attempt, pass it to `wait`. */
  readonly tick: number;
  /** Waiting now. */
  readonly size: number;
  /** Resolves once the log may have grown since `since` (at once if it already did). */
  wait(since: number, ms: number, signal?: AbortSignal): Promise<WaitEnd>;
  /** This process appended; `stamp` is what `probe` will read for it (spares a spurious wake). */
  notify(stamp?: string): void;
  /** Ends every wait ("closed") and refuses new ones: the gateway is stopping. */
  close(): void;
}

export interface LogWaitersOptions {
  after: After;
  /** One read that changes whenever the served checkpoint may have (the head's size). */
  probe: () => Promise<string>;
  pollMs: number;
  /** Waiters at once; past it a wait ends "full" at once (the caller answers 503). */
  max: number;
  onError?: (e: unknown) => void;
}

interface Waiter {
  resolve: (end: WaitEnd) => void;
  deadline: Deadline;
  signal?: AbortSignal;
  onAbort: () => void;
}

export function createLogWaiters(o: LogWaitersOptions): LogWaiters {
  const waiting = new Set<Waiter>();
  let tick = 0;
  let closed = false;
  // Kept across polling spells: a change between spells still counts (a spurious wake costs
  // one more attempt; a missed one would cost the whole wait). Unknown at first: wake once.
  let stamp: string | undefined;
  let poll: Deadline | null = null;
  let probing = false;

  const finish = (w: Waiter, end: WaitEnd) => {
    if (!waiting.delete(w)) return;
    w.deadline.cancel();
    w.signal?.removeEventListener("abort", w.onAbort);
    w.resolve(end);
  };

  const wakeAll = (end: WaitEnd) => {
    for (const w of [...waiting]) finish(w, end);
  };

  const changed = () => {
    tick++;
    wakeAll("changed");
  };

  const arm = () => {
    if (poll !== null || probing || closed || waiting.size === 0) return;
    poll = o.after(o.pollMs, () => {
      poll = null;
      if (waiting.size === 0 || closed) return;
      probing = true;
      o.probe().then(
        (now) => {
          if (now !== stamp) {
            stamp = now;
            changed();
          }
        },
        (e) => o.onError?.(e),
      ).finally(() => {
        probing = false;
        arm();
      });
    });
  };

  return {
    get tick() {
      return tick;
    },
    get size() {
      return waiting.size;
    },
    wait(since, ms, signal) {
      if (closed) return Promise.resolve("closed");
      if (tick !== since) return Promise.resolve("changed");
      if (signal?.aborted) return Promise.resolve("aborted");
      if (waiting.size >= o.max) return Promise.resolve("full");
      return new Promise<WaitEnd>((resolve) => {
        const w: Waiter = {
          resolve,
          signal,
          deadline: o.after(ms, () => finish(w, "timeout")),
          onAbort: () => finish(w, "aborted"),
        };
        signal?.addEventListener("abort", w.onAbort, { once: true });
        waiting.add(w);
        arm();
      });
    },
    notify(now) {
      if (now !== undefined) stamp = now;
      changed();
    },
    close() {
      closed = true;
      poll?.cancel();
      poll = null;
      wakeAll("closed");
    },
  };
}
