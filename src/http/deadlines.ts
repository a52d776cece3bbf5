/**
 * Deadlines for the request path. Every request arms several (its body, the
 * upstream's head, the upstream body's total and idle limits) and almost
 * always cancels them within a millisecond. One runtime timer per deadline
 * was a visible share of the gateway's CPU per request (creating and
 * clearing a timer goes through the runtime's timer queue each time), so
 * `DeadlineWheel` keeps them in coarse slots behind a single runtime timer:
 * arming and cancelling are a Set insertion and deletion.
 *
 * A deadline fires no earlier than asked and at most one slot later; the slot
 * is `minSlotMs` doubled until 64 slots cover the delay (1/64 to 1/32 of it),
 * so a 60 s limit may fire up to 1.28 s late and a 200 ms one up to 10 ms late. Limits are patience bounds,
 * not schedules, so lateness in proportion is the right trade.
 *
 * When the last deadline is cancelled the runtime timer is kept, unreferenced
 * (it holds no process alive and no test's sanitizer counts it), and referenced
 * again by the next deadline armed no earlier than it: one request at a time
 * arms and cancels each of its deadlines with nothing else armed, and clearing
 * and recreating the timer each time cost a lone request four runtime timers
 * (docs/decisions/lone-request.md). A kept timer that fires with nothing armed
 * just ends.
 */

/** An armed deadline; `cancel` is idempotent and a no-op once it fired. */
export interface Deadline {
  cancel(): void;
}

/** Arms `fire` to run once after `ms` milliseconds unless cancelled. */
export type After = (ms: number, fire: () => void) => Deadline;

/** One runtime timer per deadline (unit tests, tools; the gateway passes a wheel's). */
export const timerAfter: After = (ms, fire) => {
  const t = setTimeout(fire, ms);
  return { cancel: () => clearTimeout(t) };
};

class Entry implements Deadline {
  constructor(
    readonly wheel: DeadlineWheel,
    readonly fire: () => void,
    public slot: Set<Entry> | null,
  ) {}

  cancel(): void {
    if (this.slot === null) return;
    this.slot.delete(this);
    this.slot = null;
    this.wheel.released();
  }
}

export class DeadlineWheel {
  readonly #now: () => number;
  readonly #minSlotMs: number;
  /** Slot end time (ms) → its deadlines. Emptied slots stay until due (bounded: see `after`). */
  #slots = new Map<number, Set<Entry>>();
  /** Min-heap of the keys of `#slots`. */
  #heap: number[] = [];
  #live = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Infinity;
  /** The runtime timer is unreferenced (kept while nothing is armed). */
  #kept = false;

  /** `now`: a monotonic clock in ms. */
  constructor(now: () => number, minSlotMs = 10) {
    this.#now = now;
    this.#minSlotMs = minSlotMs;
  }

  /** Deadlines armed and neither fired nor cancelled. */
  get size(): number {
    return this.#live;
  }

  readonly after: After = (ms, fire) => {
    const delay = Math.max(0, ms);
    // Slot width: a power of two times the minimum, 1/64 to 1/32 of the delay,
    // so each distinct delay keeps ~64–128 slots however many are armed.
    let width = this.#minSlotMs;
    while (width * 64 < delay) width *= 2;
    const at = Math.ceil((this.#now() + delay) / width) * width;
    let slot = this.#slots.get(at);
    if (slot === undefined) {
      slot = new Set();
      this.#slots.set(at, slot);
      heapPush(this.#heap, at);
    }
    const e = new Entry(this, fire, slot);
    slot.add(e);
    this.#live++;
    if (at < this.#timerAt) this.#schedule(at);
    else if (this.#kept) {
      Deno.refTimer(this.#timer!);
      this.#kept = false;
    }
    return e;
  };

  /** An entry left its slot without firing. */
  released(): void {
    if (--this.#live === 0) this.#idle();
  }

  /**
   * Nothing armed: a runtime timer still pending stays for the next deadline, unreferenced
   * (it must not keep the process alive).
   */
  #idle(): void {
    if (this.#timer !== undefined && !this.#kept) {
      Deno.unrefTimer(this.#timer);
      this.#kept = true;
    }
    this.#slots.clear();
    this.#heap.length = 0;
  }

  #schedule(at: number): void {
    clearTimeout(this.#timer);
    this.#kept = false;
    this.#timerAt = at;
    this.#timer = setTimeout(this.#tick, Math.max(0, at - this.#now()));
  }

  /** Clears the runtime timer (on shutdown); deadlines still armed will not fire. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
    this.#kept = false;
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    this.#kept = false;
    const now = this.#now();
    const due: Entry[] = [];
    while (this.#heap.length > 0 && this.#heap[0] <= now) {
      const at = heapPop(this.#heap);
      const slot = this.#slots.get(at);
      if (slot === undefined) continue;
      this.#slots.delete(at);
      for (const e of slot) {
        e.slot = null;
        due.push(e);
      }
    }
    this.#live -= due.length;
    if (this.#live === 0) this.#idle();
    else this.#schedule(this.#heap[0]);
    for (const e of due) {
      try {
        e.fire();
      } catch (err) {
        // As a runtime timer would: the error is reported, the other deadlines still fire.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  };
}

function heapPush(h: number[], v: number): void {
  let i = h.push(v) - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (h[p] <= v) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = v;
}

function heapPop(h: number[]): number {
  const top = h[0];
  const last = h.pop()!;
  if (h.length > 0) {
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const c = l + 1 < h.length && h[l + 1] < h[l] ? l + 1 : l;
      if (h[c] >= last) break;
      h[i] = h[c];
      i = c;
    }
    h[i] = last;
  }
  return top;
}
