/**
 * One timer for the idle and keep-alive deadlines of every open stream.
 *
 * A timer per stream, re-armed around each upstream read, cost a timer, a
 * promise race and their closures on every read, and about 1 KB per held
 * stream. The deadlines are seconds long (15 s keep-alive, 120 s idle by
 * default), so checking them every tenth of the shorter one is exact enough:
 * a deadline is acted on at most one period late. The timer runs only while
 * at least one stream is registered, so an idle gateway (or a finished test)
 * holds no timer.
 */

export type Tick = (nowMs: number) => void;

export class StreamTicker {
  readonly periodMs: number;
  readonly #now: () => number;
  readonly #onError: (e: unknown) => void;
  readonly #ticks = new Set<Tick>();
  #timer: ReturnType<typeof setInterval> | undefined;

  /**
   * `now`: a monotonic clock in ms (the one the streams measure their reads with).
   * `onError`: told when a tick throws (the other streams still get theirs).
   */
  constructor(periodMs: number, now: () => number, onError: (e: unknown) => void = () => {}) {
    if (!Number.isInteger(periodMs) || periodMs < 1) {
      throw new RangeError("periodMs must be a positive integer");
    }
    this.periodMs = periodMs;
    this.#now = now;
    this.#onError = onError;
  }

  /** Calls `tick(now)` every period until the returned function is called. */
  add(tick: Tick): () => void {
    this.#ticks.add(tick);
    this.#timer ??= setInterval(() => this.#run(), this.periodMs);
    return () => {
      if (!this.#ticks.delete(tick) || this.#ticks.size > 0) return;
      clearInterval(this.#timer);
      this.#timer = undefined;
    };
  }

  /** Registered streams (for tests and leak checks). */
  get size(): number {
    return this.#ticks.size;
  }

  #run(): void {
    const now = this.#now();
    for (const tick of this.#ticks) {
      try {
        tick(now);
      } catch (e) {
        this.#onError(e);
      }
    }
  }
}

/** A tenth of the shorter deadline, within 5 ms .. 1 s. */
export function tickPeriodMs(idleMs: number, keepAliveMs: number): number {
  return Math.min(1_000, Math.max(5, Math.floor(Math.min(idleMs, keepAliveMs) / 10)));
}
