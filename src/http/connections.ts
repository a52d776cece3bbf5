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
  ConnectionStats,
} from "./connection_types.ts";
import { TlsRelay } from "./tls_relay.ts";
import { closeQuietly, TrackedConn } from "./tracked_conn.ts";

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

const REFUSAL_BODY =
  '{"error":{"message":"Too many open connections; retry shortly.","type":"service_unavailable"}}';
const REFUSAL = new TextEncoder().encode(
  "HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-type: application/json\r\n" +
    `retry-after: 1\r\ncontent-length: ${REFUSAL_BODY.length}\r\n\r\n${REFUSAL_BODY}`,
);

/** Serves `listener`'s connections with `handler` under `opts.limits`. */
export function serveConnections(
  listener: Deno.Listener,
  handler: (req: Request) => Promise<Response>,
  opts: ConnectionServerOptions,
): ConnectionServer {
  return new AcceptLoop(listener, handler, opts);
}

/** The open connections, their deadlines and the accept loop that admits them. */
class AcceptLoop implements ConnectionServer {
  #listener: Deno.Listener;
  #handler: (req: Request) => Promise<Response>;
  #opts: ConnectionServerOptions;
  #conns = new Set<TrackedConn>();
  #stats: Omit<ConnectionStats, "open"> = {
    headerTimeouts: 0,
    idleTimeouts: 0,
    evicted: 0,
    refused: 0,
    acceptErrors: 0,
  };
  /** Open and not closing: what the cap counts. */
  #live = 0;
  #stopping = false;
  #ticker: ReturnType<typeof setInterval> | undefined;
  #tickMs: number;
  #allClosed: (() => void) | null = null;
  #tls: TlsRelay | null;
  #accepted: Promise<void>;
  #innerAccepted: Promise<void> | null;

  constructor(
    listener: Deno.Listener,
    handler: (req: Request) => Promise<Response>,
    opts: ConnectionServerOptions,
  ) {
    this.#listener = listener;
    this.#handler = handler;
    this.#opts = opts;
    const { headerTimeoutMs, idleTimeoutMs } = opts.limits;
    this.#tickMs = Math.min(
      1_000,
      Math.max(25, Math.floor(Math.min(headerTimeoutMs, idleTimeoutMs) / 4)),
    );
    this.#tls = opts.tls ? new TlsRelay(opts.tls, this.#serve, () => this.#stopping) : null;
    this.#innerAccepted = this.#tls?.acceptInner() ?? null;
    this.#accepted = this.#acceptLoop();
  }

  stats(): ConnectionStats {
    return { open: this.#conns.size, ...this.#stats };
  }

  async shutdown(): Promise<void> {
    this.#stopping = true;
    try {
      this.#listener.close();
    } catch {
      // already closed
    }
    await this.#accepted;
    const closed = new Promise<void>((r) => {
      this.#allClosed = r;
      if (this.#conns.size === 0) r();
    });
    for (const c of this.#conns) this.#closeConn(c, true);
    await closed;
    if (this.#opts.tls) {
      try {
        this.#opts.tls.listener.close();
      } catch {
        // already closed
      }
      await this.#innerAccepted;
    }
  }

  async #acceptLoop(): Promise<void> {
    const stats = this.#stats;
    while (!this.#stopping) {
      let conn: Deno.Conn;
      try {
        conn = await this.#listener.accept();
      } catch (e) {
        if (
          this.#stopping || e instanceof Deno.errors.BadResource ||
          e instanceof Deno.errors.Interrupted
        ) {
          break;
        }
        // Out of descriptors (EMFILE/ENFILE) or a connection reset before accept:
        // free the longest-waiting connection's descriptor and try again shortly.
        stats.acceptErrors++;
        if (stats.acceptErrors === 1 || stats.acceptErrors % 100 === 0) {
          this.#opts.log({
            level: "warn",
            event: "accept_failed",
            error: String(e),
            count: stats.acceptErrors,
          });
        }
        const victim = this.#longestWaiting();
        if (victim) {
          stats.evicted++;
          this.#closeConn(victim);
        }
        await new Promise((r) => setTimeout(r, ACCEPT_BACKOFF_MS));
        continue;
      }
      if (this.#stopping) {
        this.#refuse(conn);
        break;
      }
      if (this.#live >= this.#opts.limits.maxConnections) {
        const victim = this.#longestWaiting();
        if (victim === null) {
          this.#refuse(conn);
          continue;
        }
        stats.evicted++;
        this.#closeConn(victim);
      }
      if ("setNoDelay" in conn) (conn as Deno.TcpConn).setNoDelay(true);
      this.#track(conn);
    }
  }

  #track(conn: Deno.Conn): void {
    const t = new TrackedConn(this.#handler, this.#opts.now);
    this.#conns.add(t);
    this.#live++;
    this.#ticker ??= setInterval(this.#tick, this.#tickMs);
    const running = this.#tls ? this.#tls.relay(t, conn) : this.#serve(t, conn);
    running.finally(() => this.#gone(t));
  }

  /**
   * Hands a connection to the runtime's HTTP server; resolves when it is done. A field (one
   * function per server): the TLS relay calls it back.
   */
  #serve = (t: TrackedConn, conn: Deno.Conn): Promise<void> => {
    try {
      const served = this.#opts.serveOn(conn, t.perConn, onError);
      // The runtime's shutdown tolerates a connection that is already gone.
      t.drain = () => void served.shutdown().catch(() => {});
      if (!this.#opts.tls) t.close = t.drain;
      return served.finished.catch(() => {});
    } catch {
      closeQuietly(conn);
      return Promise.resolve();
    }
  };

  #closeConn(t: TrackedConn, drain = false): void {
    if (t.closing) return;
    t.closing = true;
    this.#live--;
    if (drain) t.drain();
    else t.close();
  }

  #gone(t: TrackedConn): void {
    this.#conns.delete(t);
    if (!t.closing) this.#live--;
    t.closing = true;
    if (this.#conns.size === 0) {
      if (this.#ticker !== undefined) clearInterval(this.#ticker);
      this.#ticker = undefined;
      this.#allClosed?.();
    }
  }

  // One timer for every connection's deadline (a per-request timer would cost more); a field,
  // as the interval calls it.
  #tick = (): void => {
    const t = this.#opts.now();
    const { idleTimeoutMs, headerTimeoutMs } = this.#opts.limits;
    for (const c of this.#conns) {
      if (c.inFlight > 0 || c.closing) continue;
      if (c.served ? t - c.since >= idleTimeoutMs : t - c.since >= headerTimeoutMs) {
        if (c.served) this.#stats.idleTimeouts++;
        else this.#stats.headerTimeouts++;
        this.#closeConn(c);
      }
    }
  };

  /**
   * The connection to close for room: of those with nothing in flight, the one that
   * has waited longest, preferring one that never sent a request (a slow or silent
   * one) over a kept-alive client between requests.
   */
  #longestWaiting(): TrackedConn | null {
    let best: TrackedConn | null = null;
    for (const c of this.#conns) {
      if (c.inFlight > 0 || c.closing) continue;
      if (
        best === null || (best.served && !c.served) ||
        (best.served === c.served && c.since < best.since)
      ) best = c;
    }
    return best;
  }

  #refuse(conn: Deno.Conn): void {
    this.#stats.refused++;
    const close = () => closeQuietly(conn);
    if (this.#opts.tls) return close();
    conn.write(REFUSAL).then(close, close);
  }
}

function onError(): Response {
  return new Response("Internal Server Error", { status: 500 });
}
