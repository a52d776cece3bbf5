/**
 * The gateway's own accept loop around the runtime's HTTP server, for what
 * `Deno.serve` cannot be told (denoland/deno#3515): a cap on open
 * connections, a deadline for a connection's first request head, an idle
 * keep-alive deadline, and surviving descriptor exhaustion (`accept` failing
 * with EMFILE backs off instead of killing the process).
 *
 * Every accepted connection is handed whole to the runtime's HTTP/1.1 and
 * HTTP/2 implementation (`serveOn`), so request parsing, and with it every
 * request-smuggling defence, stays the runtime's; this layer only sees when a
 * request reaches the handler and when its response has been delivered. A
 * connection is "waiting" while it has no request in flight: from accept
 * until its first head arrives (`headerTimeoutMs`), and after each response
 * until the next head arrives (`idleTimeoutMs`). Waiting past the deadline
 * closes it. A connection with a request in flight is never closed here, so
 * a response streaming tokens is not cut.
 *
 * At the cap, a new connection evicts the connection that has waited longest
 * without a request in flight, one that never sent a request first (a slow or
 * silent one), then an idle kept-alive one; only when every connection has a
 * request in flight is the newcomer refused, with a canned 503 on plaintext and
 * a plain close on TLS (answering would cost a handshake).
 */

import type {
  ConnectionServer,
  ConnectionServerOptions,
  ServeInfo,
  TlsFront,
} from "./connection_types.ts";

export type {
  ConnectionLimits,
  ConnectionServer,
  ConnectionServerOptions,
  ConnectionStats,
  ServeInfo,
  ServeOn,
  TlsFront,
} from "./connection_types.ts";

const ACCEPT_BACKOFF_MS = 100;
/** A relayed TLS connection whose outer side is not known by then is dropped. */
const UNMATCHED_MS = 5_000;

const REFUSAL_BODY =
  '{"error":{"message":"Too many open connections; retry shortly.","type":"service_unavailable"}}';
const REFUSAL = new TextEncoder().encode(
  "HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-type: application/json\r\n" +
    `retry-after: 1\r\ncontent-length: ${REFUSAL_BODY.length}\r\n\r\n${REFUSAL_BODY}`,
);

interface Tracked {
  /** Closes a waiting connection. */
  close: () => void;
  /** Graceful close: at once when idle, after the in-flight responses otherwise. */
  drain: () => void;
  /** Requests of this connection, as the runtime serves them. */
  perConn: (req: Request, info: ServeInfo) => Promise<Response>;
  /** Requests on this connection whose responses are not yet delivered. */
  inFlight: number;
  /** Whether a request head ever arrived (decides which deadline a wait has). */
  served: boolean;
  /** When the current wait began (monotonic ms); meaningful while `inFlight` is 0. */
  since: number;
  closing: boolean;
}

// Long as one closure over shared state; each inner function is short.
export function serveConnections(
  listener: Deno.Listener,
  handler: (req: Request) => Promise<Response>,
  opts: ConnectionServerOptions,
): ConnectionServer {
  const { limits, now } = opts;
  const conns = new Set<Tracked>();
  const stats = {
    headerTimeouts: 0,
    idleTimeouts: 0,
    evicted: 0,
    refused: 0,
    acceptErrors: 0,
  };
  let live = 0; // open and not closing: what the cap counts
  let stopping = false;
  let ticker: ReturnType<typeof setInterval> | undefined;
  let allClosed: (() => void) | null = null;
  const tickMs = Math.min(
    1_000,
    Math.max(25, Math.floor(Math.min(limits.headerTimeoutMs, limits.idleTimeoutMs) / 4)),
  );

  const closeConn = (t: Tracked, drain = false) => {
    if (t.closing) return;
    t.closing = true;
    live--;
    if (drain) t.drain();
    else t.close();
  };

  // One timer for every connection's deadline (a per-request timer would cost more).
  const tick = () => {
    const t = now();
    for (const c of conns) {
      if (c.inFlight > 0 || c.closing) continue;
      if (c.served ? t - c.since >= limits.idleTimeoutMs : t - c.since >= limits.headerTimeoutMs) {
        if (c.served) stats.idleTimeouts++;
        else stats.headerTimeouts++;
        closeConn(c);
      }
    }
  };

  /**
   * The connection to close for room: of those with nothing in flight, the one that
   * has waited longest, preferring one that never sent a request (a slow or silent
   * one) over a kept-alive client between requests.
   */
  const longestWaiting = (): Tracked | null => {
    let best: Tracked | null = null;
    for (const c of conns) {
      if (c.inFlight > 0 || c.closing) continue;
      if (
        best === null || (best.served && !c.served) ||
        (best.served === c.served && c.since < best.since)
      ) best = c;
    }
    return best;
  };

  const refuse = (conn: Deno.Conn) => {
    stats.refused++;
    const close = () => closeQuietly(conn);
    if (opts.tls) return close();
    conn.write(REFUSAL).then(close, close);
  };

  /** Relayed TLS connections not yet matched, by the loopback port they come from. */
  const relayed = new Map<number, Tracked>();
  const unmatched = new Map<number, Deno.Conn>();

  const gone = (t: Tracked) => {
    conns.delete(t);
    if (!t.closing) live--;
    t.closing = true;
    if (conns.size === 0) {
      if (ticker !== undefined) clearInterval(ticker);
      ticker = undefined;
      allClosed?.();
    }
  };

  /** Hands a connection to the runtime's HTTP server; resolves when it is done. */
  const serve = (t: Tracked, conn: Deno.Conn): Promise<void> => {
    try {
      const served = opts.serveOn(conn, t.perConn, onError);
      // The runtime's shutdown tolerates a connection that is already gone.
      t.drain = () => void served.shutdown().catch(() => {});
      if (!opts.tls) t.close = t.drain;
      return served.finished.catch(() => {});
    } catch {
      closeQuietly(conn);
      return Promise.resolve();
    }
  };

  const track = (conn: Deno.Conn) => {
    const t: Tracked = {
      close: () => {},
      drain: () => {},
      perConn: (req, info) => {
        t.inFlight++;
        t.served = true;
        info.completed.then(done, done);
        return handler(req);
      },
      inFlight: 0,
      served: false,
      since: now(),
      closing: false,
    };
    const done = () => {
      t.inFlight--;
      if (t.inFlight > 0) return;
      t.since = now();
    };
    conns.add(t);
    live++;
    ticker ??= setInterval(tick, tickMs);
    if (!opts.tls) {
      serve(t, conn).finally(() => gone(t));
      return;
    }
    relay(t, conn, opts.tls).finally(() => gone(t));
  };

  /** Relays a TLS connection to the loopback TLS listener until either side closes. */
  const relay = async (t: Tracked, outer: Deno.Conn, front: TlsFront): Promise<void> => {
    let inner: Deno.Conn | null = null;
    t.close = () => {
      closeQuietly(outer);
      if (inner) closeQuietly(inner);
    };
    t.drain = t.close;
    try {
      inner = await front.connect();
    } catch {
      closeQuietly(outer);
      return;
    }
    if (t.closing) return t.close();
    const port = (inner.localAddr as Deno.NetAddr).port;
    const early = unmatched.get(port);
    unmatched.delete(port);
    let served: Promise<void> = Promise.resolve();
    if (early) served = serve(t, early);
    else relayed.set(port, t);
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
    relayed.delete(port);
    t.close();
    await served;
  };

  // The loopback TLS side: match each relayed connection to its outer one.
  const innerAccepted = opts.tls && (async (front: TlsFront) => {
    while (true) {
      let conn: Deno.Conn;
      try {
        conn = await front.listener.accept();
      } catch (e) {
        if (stopping || e instanceof Deno.errors.BadResource) break;
        await new Promise((r) => setTimeout(r, ACCEPT_BACKOFF_MS));
        continue;
      }
      const port = (conn.remoteAddr as Deno.NetAddr).port;
      const t = relayed.get(port);
      if (t === undefined) {
        // Its outer side is still connecting (or already gone: then it is dropped soon).
        unmatched.set(port, conn);
        setTimeout(() => {
          if (unmatched.get(port) !== conn) return;
          unmatched.delete(port);
          closeQuietly(conn);
        }, UNMATCHED_MS);
        continue;
      }
      relayed.delete(port);
      void serve(t, conn); // the relay ends with it: the loopback side closes
    }
  })(opts.tls);

  const accepted = (async () => {
    while (!stopping) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (e) {
        if (
          stopping || e instanceof Deno.errors.BadResource || e instanceof Deno.errors.Interrupted
        ) {
          break;
        }
        // Out of descriptors (EMFILE/ENFILE) or a connection reset before accept:
        // free the longest-waiting connection's descriptor and try again shortly.
        stats.acceptErrors++;
        if (stats.acceptErrors === 1 || stats.acceptErrors % 100 === 0) {
          opts.log({
            level: "warn",
            event: "accept_failed",
            error: String(e),
            count: stats.acceptErrors,
          });
        }
        const victim = longestWaiting();
        if (victim) {
          stats.evicted++;
          closeConn(victim);
        }
        await new Promise((r) => setTimeout(r, ACCEPT_BACKOFF_MS));
        continue;
      }
      if (stopping) {
        refuse(conn);
        break;
      }
      if (live >= limits.maxConnections) {
        const victim = longestWaiting();
        if (victim === null) {
          refuse(conn);
          continue;
        }
        stats.evicted++;
        closeConn(victim);
      }
      if ("setNoDelay" in conn) (conn as Deno.TcpConn).setNoDelay(true);
      track(conn);
    }
  })();

  return {
    stats: () => ({ open: conns.size, ...stats }),
    async shutdown() {
      stopping = true;
      try {
        listener.close();
      } catch {
        // already closed
      }
      await accepted;
      const closed = new Promise<void>((r) => {
        allClosed = r;
        if (conns.size === 0) r();
      });
      for (const c of conns) closeConn(c, true);
      await closed;
      if (opts.tls) {
        try {
          opts.tls.listener.close();
        } catch {
          // already closed
        }
        await innerAccepted;
      }
    },
  };
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

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // already closed
  }
}

function onError(): Response {
  return new Response("Internal Server Error", { status: 500 });
}
