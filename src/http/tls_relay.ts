/**
 * TLS connections relayed to the runtime's loopback TLS listener, so the
 * accept loop counts and closes the outer connection while the runtime
 * terminates TLS: each outer connection is matched to its inner one by the
 * loopback port the relay connects from.
 */
import type { TlsFront } from "./connection_types.ts";
import { closeQuietly, type TrackedConn } from "./tracked_conn.ts";

const ACCEPT_BACKOFF_MS = 100;
/** A relayed TLS connection whose outer side is not known by then is dropped. */
const UNMATCHED_MS = 5_000;

export class TlsRelay {
  #front: TlsFront;
  #serve: (t: TrackedConn, conn: Deno.Conn) => Promise<void>;
  #stopping: () => boolean;
  /** Relayed TLS connections not yet matched, by the loopback port they come from. */
  #relayed = new Map<number, TrackedConn>();
  #unmatched = new Map<number, Deno.Conn>();

  constructor(
    front: TlsFront,
    serve: (t: TrackedConn, conn: Deno.Conn) => Promise<void>,
    stopping: () => boolean,
  ) {
    this.#front = front;
    this.#serve = serve;
    this.#stopping = stopping;
  }

  /** Relays a TLS connection to the loopback TLS listener until either side closes. */
  async relay(t: TrackedConn, outer: Deno.Conn): Promise<void> {
    let inner: Deno.Conn | null = null;
    t.close = () => {
      closeQuietly(outer);
      if (inner) closeQuietly(inner);
    };
    t.drain = t.close;
    try {
      inner = await this.#front.connect();
    } catch {
      closeQuietly(outer);
      return;
    }
    if (t.closing) return t.close();
    const port = (inner.localAddr as Deno.NetAddr).port;
    const early = this.#unmatched.get(port);
    this.#unmatched.delete(port);
    let served: Promise<void> = Promise.resolve();
    if (early) served = this.#serve(t, early);
    else this.#relayed.set(port, t);
    const innerConn = inner;
    t.close = () => {
      closeQuietly(outer);
      closeQuietly(innerConn);
    };
    if (early === undefined) t.drain = t.close;
    await Promise.all([
      // The client's half-close is passed on; the server's close ends the relay.
      pump(outer, innerConn).then(() => innerConn.closeWrite().catch(() => {})),
      pump(innerConn, outer).then(t.close),
    ]);
    this.#relayed.delete(port);
    t.close();
    await served;
  }

  /** The loopback TLS side: matches each relayed connection to its outer one. */
  async acceptInner(): Promise<void> {
    while (true) {
      let conn: Deno.Conn;
      try {
        conn = await this.#front.listener.accept();
      } catch (e) {
        if (this.#stopping() || e instanceof Deno.errors.BadResource) break;
        await new Promise((r) => setTimeout(r, ACCEPT_BACKOFF_MS));
        continue;
      }
      const port = (conn.remoteAddr as Deno.NetAddr).port;
      const t = this.#relayed.get(port);
      if (t === undefined) {
        // Its outer side is still connecting (or already gone: then it is dropped soon).
        this.#unmatched.set(port, conn);
        setTimeout(() => {
          if (this.#unmatched.get(port) !== conn) return;
          this.#unmatched.delete(port);
          closeQuietly(conn);
        }, UNMATCHED_MS);
        continue;
      }
      this.#relayed.delete(port);
      void this.#serve(t, conn); // the relay ends with it: the loopback side closes
    }
  }
}

/** Copies `from` to `to` until `from` ends or either fails. */
async function pump(from: Deno.Conn, to: Deno.Conn): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  try {
    while (true) {
      const n = await from.read(buf);
      if (n === null) return;
      let off = 0;
      while (off < n) off += await to.write(buf.subarray(off, n));
    }
  } catch {
    // either side closed
  }
}
