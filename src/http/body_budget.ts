/**
 * Request-body bytes being read and parsed at once, bounded globally and per
 * API key. A request reserves its body's bytes before reading them (the
 * declared length, or growing steps for a chunked body) and holds them until
 * admission has decided; a request that does not fit waits, first come first
 * served, while its bytes stay in the client's socket rather than in memory.
 * One key's flood therefore waits behind its own share and leaves the rest
 * of the budget to other keys.
 *
 * A single body larger than a limit is let in only when nothing else holds
 * that limit, so a configured `max_body_bytes` above the budget still works,
 * one body at a time.
 */

export interface BodyBudgetLimits {
  /** Bytes reserved across all keys at most. */
  global: number;
  /** Bytes reserved by one key at most. */
  perKey: number;
}

/** One request's reservation. */
export interface BodyTicket {
  /** Grows the reservation to `total` bytes, waiting for room; rejects when `signal` aborts. */
  reserve(total: number, signal?: AbortSignal): Promise<void>;
  /** Returns every reserved byte (idempotent). */
  release(): void;
}

interface Waiter {
  key: string;
  bytes: number;
  grant: () => void;
}

export class BodyBudget {
  #used = 0;
  readonly #byKey = new Map<string, number>();
  #queue: Waiter[] = [];

  constructor(readonly limits: BodyBudgetLimits) {
    if (!(limits.global > 0 && limits.perKey > 0)) {
      throw new RangeError("body budget limits must be positive");
    }
  }

  /** Bytes reserved now, all keys. */
  get used(): number {
    return this.#used;
  }

  /** Requests waiting for room. */
  get waiting(): number {
    return this.#queue.length;
  }

  ticket(key: string): BodyTicket {
    let held = 0;
    let released = false;
    return {
      reserve: (total, signal) => {
        const more = total - held;
        if (released || more <= 0) return Promise.resolve();
        const take = () => {
          held += more;
          this.#take(key, more);
        };
        if (this.#queue.length === 0 && this.#fits(key, more)) {
          take();
          return Promise.resolve();
        }
        return new Promise<void>((resolve, reject) => {
          if (signal?.aborted) return reject(signal.reason);
          const w: Waiter = {
            key,
            bytes: more,
            grant: () => {
              signal?.removeEventListener("abort", onAbort);
              if (released) return resolve();
              take();
              resolve();
            },
          };
          const onAbort = () => {
            const i = this.#queue.indexOf(w);
            if (i >= 0) this.#queue.splice(i, 1);
            this.#pump(); // a waiter behind it may fit now
            reject(signal!.reason);
          };
          signal?.addEventListener("abort", onAbort, { once: true });
          this.#queue.push(w);
          this.#pump(); // queued only behind another key's share, it may go at once
        });
      },
      release: () => {
        if (released) return;
        released = true;
        if (held === 0) return;
        this.#give(key, held);
        held = 0;
        this.#pump();
      },
    };
  }

  #fits(key: string, bytes: number): boolean {
    const k = this.#byKey.get(key) ?? 0;
    return (this.#used + bytes <= this.limits.global || this.#used === 0) &&
      (k + bytes <= this.limits.perKey || k === 0);
  }

  #take(key: string, bytes: number): void {
    this.#used += bytes;
    this.#byKey.set(key, (this.#byKey.get(key) ?? 0) + bytes);
  }

  #give(key: string, bytes: number): void {
    this.#used -= bytes;
    const k = (this.#byKey.get(key) ?? 0) - bytes;
    if (k <= 0) this.#byKey.delete(key);
    else this.#byKey.set(key, k);
  }

  /**
   * Grants waiters in arrival order. One held back by its key's share does not
   * hold back other keys; one held back by the global limit holds back
   * everyone behind it (else small bodies could starve a large one forever).
   */
  #pump(): void {
    const rest: Waiter[] = [];
    let blocked = false;
    for (const w of this.#queue) {
      const k = this.#byKey.get(w.key) ?? 0;
      const keyOk = k + w.bytes <= this.limits.perKey || k === 0;
      const globalOk = this.#used + w.bytes <= this.limits.global || this.#used === 0;
      if (!blocked && keyOk && globalOk) {
        w.grant(); // takes the bytes synchronously
      } else {
        if (keyOk && !globalOk) blocked = true;
        rest.push(w);
      }
    }
    this.#queue = rest;
  }
}
