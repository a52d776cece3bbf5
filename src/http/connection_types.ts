/**
 * The shapes of the accept loop (src/http/connections.ts): its limits, the
 * runtime's per-connection server it drives, its counters and its TLS front.
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

/**
 * TLS termination behind the accept loop. The runtime cannot close a TLS
 * connection whose handshake never completes (its handshake task holds the
 * socket), so TLS connections are accepted as plain TCP here and relayed to
 * `listener`, a loopback TLS listener: the loop keeps a socket it can close.
 */
export interface TlsFront {
  /** The loopback TLS listener the relayed connections reach. */
  listener: Deno.Listener;
  /** Opens a loopback connection to `listener`. */
  connect(): Promise<Deno.Conn>;
}

export interface ConnectionServerOptions {
  limits: ConnectionLimits;
  serveOn: ServeOn;
  /** Terminate TLS (refusals at the cap are then a plain close, not a 503). */
  tls?: TlsFront;
  /** Monotonic milliseconds. */
  now: () => number;
  log: (line: Record<string, unknown>) => void;
}
