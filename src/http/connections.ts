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
 * (a slow or idle one); only when every connection has a request in flight is
 * the newcomer refused, with a canned 503 on plaintext and a plain close on
 * TLS (answering would cost a handshake).
 */

export interface ConnectionLimits {
  /** Open connections at most (per listener). */
  maxConnections: number;
  /** A new connection must deliver a complete request head within this. */
  headerTimeoutMs: number;
  /** A connection with nothing in flight is closed after this (covers the next head). */
  idleTimeoutMs: number;
}

/** What the handler is told of each request (the runtime's `ServeHandlerInfo` subset). */
export interface ServeInfo {
  completed: Promise<void>;
}

/**
 * Serves HTTP on one accepted connection until the peer leaves or `shutdown`
 * is called (which closes it at once when nothing is in flight, else once the
 * in-flight responses are delivered).
 */
export type ServeOn = (
  conn: Deno.Conn,
  handler: (req: Request, info: ServeInfo) => Response | Promise<Response>,
  onError: (e: unknown) => Response,
) => { finished: Promise<void>; shutdown(): Promise<void> };

export interface ConnectionStats {
  /** Connections open now (waiting or busy). */
  open: number;
  /** Closed for not delivering a request head in time. */
  headerTimeouts: number;
  /** Closed after idling past the keep-alive deadline. */
  idleTimeouts: number;
  /** Closed to make room for a new connection at the cap. */
  evicted: number;
  /** New connections refused at the cap (every open one was busy). */
  refused: number;
  /** `accept` failures (descriptor exhaustion and the like), each followed by a back-off. */
  acceptErrors: number;
}

export interface ConnectionServer {
  stats(): ConnectionStats;
  /**
   * Stops accepting; closes waiting connections now and busy ones once their
   * responses are delivered. Resolves when every connection is closed.
   */
  shutdown(): Promise<void>;
}

export interface ConnectionServerOptions {
  limits: ConnectionLimits;
  serveOn: ServeOn;
  /** The listener terminates TLS: refuse at the cap by closing, not with a 503. */
  tls: boolean;
  /** Monotonic milliseconds. */
  now: () => number;
  log: (line: Record<string, unknown>) => void;
}

const ACCEPT_BACKOFF_MS = 100;

const REFUSAL_BODY =
  '{"error":{"message":"Too many open connections; retry shortly.","type":"service_unavailable"}}';
const REFUSAL = new TextEncoder().encode(
  "HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-type: application/json\r\n" +
    `retry-after: 1\r\ncontent-length: ${REFUSAL_BODY.length}\r\n\r\n${REFUSAL_BODY}`,
);

interface Tracked {
  /** Graceful close: at once when idle, after the in-flight responses otherwise. */
  shutdown: () => void;
  /** Requests on this connection whose responses are not yet delivered. */
  inFlight: number;
  /** Whether a request head ever arrived (decides which deadline a wait has). */
  served: boolean;
  /** When the current wait began (monotonic ms); meaningful while `inFlight` is 0. */
  since: number;
  closing: boolean;
}

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

  const closeConn = (t: Tracked) => {
    if (t.closing) return;
    t.closing = true;
    live--;
    t.shutdown();
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

  /** The connection that has waited longest for a request head, if any. */
  const longestWaiting = (): Tracked | null => {
    let best: Tracked | null = null;
    for (const c of conns) {
      if (c.inFlight > 0 || c.closing) continue;
      if (best === null || c.since < best.since) best = c;
    }
    return best;
  };

  const refuse = (conn: Deno.Conn) => {
    stats.refused++;
    const close = () => {
      try {
        conn.close();
      } catch {
        // already closed
      }
    };
    if (opts.tls) return close();
    conn.write(REFUSAL).then(close, close);
  };

  const track = (conn: Deno.Conn) => {
    const t: Tracked = {
      shutdown: () => {},
      inFlight: 0,
      served: false,
      since: now(),
      closing: false,
    };
    conns.add(t);
    live++;
    ticker ??= setInterval(tick, tickMs);
    const done = () => {
      t.inFlight--;
      if (t.inFlight > 0) return;
      t.since = now();
    };
    const perConn = (req: Request, info: ServeInfo): Promise<Response> => {
      t.inFlight++;
      t.served = true;
      info.completed.then(done, done);
      return handler(req);
    };
    let finished: Promise<void>;
    try {
      const served = opts.serveOn(conn, perConn, onError);
      finished = served.finished;
      // The runtime's shutdown tolerates a connection that is already gone.
      t.shutdown = () => void served.shutdown().catch(() => {});
    } catch (e) {
      finished = Promise.reject(e);
    }
    finished.catch(() => {}).finally(() => {
      conns.delete(t);
      if (!t.closing) live--;
      t.closing = true;
      if (conns.size === 0) {
        if (ticker !== undefined) clearInterval(ticker);
        ticker = undefined;
        allClosed?.();
      }
    });
  };

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
      for (const c of conns) closeConn(c);
      await closed;
    },
  };
}

function onError(): Response {
  return new Response("Internal Server Error", { status: 500 });
}
