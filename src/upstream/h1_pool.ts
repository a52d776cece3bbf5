/**
 * The keep-alive pool of the HTTP/1.1 client: idle connections per key
 * (origin, connector, partition), newest reused first. A connection comes
 * back only after an exchange that ended cleanly with no byte left over; while
 * idle it keeps one read pending, and any byte (or EOF) it sees closes it.
 * `drop` retires every connection of a connector (a pinned upstream whose
 * session ended): idle ones close now, busy ones when their exchange ends.
 */
import { type Conn, H1_READ_BUFFER_BYTES } from "./h1_conn.ts";

export interface H1PoolLimits {
  /** Idle connections kept per key. */
  maxIdle: number;
  /** Idle connections kept in all. */
  maxIdleTotal: number;
  /** An idle connection older than this is closed instead of reused. */
  idleTimeoutMs: number;
}

export class H1Pool {
  open = 0;
  idle = 0;
  closed = false;
  /** Idle connections per key, oldest first. */
  readonly #lists = new Map<string, Conn[]>();
  /** Per connector id: bumped by `drop`, so connections opened before it are not pooled again. */
  readonly #generations = new Map<string, number>();
  readonly #limits: H1PoolLimits;
  readonly #now: () => number;

  constructor(limits: H1PoolLimits, now: () => number) {
    this.#limits = limits;
    this.#now = now;
  }

  /** The connector's current generation (stamped on connections it opens). */
  generation(connectorId: string): number {
    return this.#generations.get(connectorId) ?? 0;
  }

  /** A freshly opened connection: counted, and watched until its request is written. */
  adopt(c: Conn): void {
    this.open++;
    this.watch(c);
  }

  close(c: Conn): void {
    if (c.closed) return;
    if (c.idle) this.#unpool(c);
    c.closed = true;
    this.open--;
    try {
      c.socket.close();
    } catch { /* already closed by the runtime */ }
  }

  /** An exchange ended cleanly: pool the connection, or close it if it may not be reused. */
  release(c: Conn): void {
    const { maxIdle, maxIdleTotal, idleTimeoutMs } = this.#limits;
    // Leftover bytes after a complete response mean the server and we disagree on framing.
    if (
      this.closed || c.closed || maxIdle === 0 || this.idle >= maxIdleTotal ||
      c.start !== c.end || c.generation !== this.generation(c.connectorId)
    ) {
      this.close(c);
      return;
    }
    const t = this.#now();
    const old = this.#lists.get(c.key);
    if (old) {
      while (old.length > 0 && t - old[0].idleSince > idleTimeoutMs) this.close(old[0]);
      if (old.length >= maxIdle) this.close(old[0]); // the oldest is the likeliest to be stale
    }
    let list = this.#lists.get(c.key); // close() drops an emptied list
    if (!list) this.#lists.set(c.key, list = []);
    c.start = c.end = 0;
    if (c.buf.length !== H1_READ_BUFFER_BYTES) c.buf = new Uint8Array(H1_READ_BUFFER_BYTES);
    c.idle = true;
    c.idleSince = t;
    list.push(c);
    this.idle++;
    this.watch(c);
  }

  /**
   * Keeps one read pending from the moment a connection is free until the parser takes it
   * over after the request is written: bytes (or EOF) arriving in between were sent for no
   * request, so an idle connection is dropped and a request being written fails.
   */
  watch(c: Conn): void {
    const p = c.socket.read(c.buf);
    c.pending = p;
    c.arrived = false;
    const settled = () => {
      if (c.pending !== p) return;
      c.arrived = true;
      if (c.idle) this.close(c);
    };
    p.then(settled, settled);
  }

  /** The newest idle connection for `key`; those past the idle timeout close. */
  checkout(key: string): Conn | null {
    const list = this.#lists.get(key);
    if (!list) return null;
    const t = this.#now();
    for (let i = list.length - 1; i >= 0; i--) {
      const c = list[i];
      if (t - c.idleSince > this.#limits.idleTimeoutMs) {
        // This one and all older ones (toward the front) are stale.
        for (const old of list.slice(0, i + 1)) this.close(old);
        return null;
      }
      this.#unpool(c);
      return c;
    }
    return null;
  }

  drop(connectorId: string): void {
    this.#generations.set(connectorId, this.generation(connectorId) + 1);
    for (const list of [...this.#lists.values()]) {
      for (const c of [...list]) if (c.connectorId === connectorId) this.close(c);
    }
  }

  closeAll(): void {
    this.closed = true;
    for (const list of [...this.#lists.values()]) for (const c of [...list]) this.close(c);
  }

  #unpool(c: Conn): void {
    c.idle = false;
    this.idle--;
    const list = this.#lists.get(c.key);
    if (!list) return;
    const i = list.indexOf(c);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.#lists.delete(c.key);
  }
}
