/**
 * One upstream connection as the HTTP/1.1 client holds it: the socket, its
 * read buffer and the bookkeeping of its keep-alive life, and the reads that
 * fill the buffer. Connecting is a connector's job (socket_connector.ts,
 * pinned_tls.ts); pooling is h1_pool.ts's.
 */

export interface H1Target {
  hostname: string;
  port: number;
  tls: boolean;
}

/** What the client needs of a connection: `Deno.Conn` has it, node sockets get it (node_socket.ts). */
export interface H1Socket {
  /** Reads into `p`; the count, or null at EOF. */
  read(p: Uint8Array): Promise<number | null>;
  write(p: Uint8Array): Promise<number>;
  close(): void;
}

/**
 * Opens a connection to the target: plain TCP or TLS (socket_connector.ts), SPKI-pinned
 * TLS (pinned_tls.ts). `signal` aborts a connect in progress (the request's signal, or
 * the client closing). A GatewayError it throws (a pin mismatch) reaches the caller as is.
 */
export type H1Connect = (t: H1Target, signal?: AbortSignal) => Promise<H1Socket>;

/**
 * A way of connecting, named: connections are pooled per connector id, so a pinned
 * connection (id names the provider and the pinned key) is never handed to a request
 * that did not ask for that pin, and `drop(id)` retires them all at once.
 */
export interface H1Connector {
  id: string;
  connect: H1Connect;
}

/** Per-connection read buffer: an SSE event is usually a few hundred bytes. */
export const H1_READ_BUFFER_BYTES = 4 * 1024;

/**
 * The read buffer while an event stream (`text/event-stream`) is read: such a
 * body may stay open for minutes delivering events of a few hundred bytes,
 * and its buffer is held all that time (hundreds of streams at once).
 */
export const H1_SSE_READ_BUFFER_BYTES = 1024;

/** Marks errors this module made, so they are not wrapped a second time. */
export class H1Error extends TypeError {}

export interface Conn {
  readonly socket: H1Socket;
  readonly key: string;
  readonly connectorId: string;
  /** The connector's generation when this was opened; a `drop` makes it stale. */
  readonly generation: number;
  /** The read buffer: H1_READ_BUFFER_BYTES, or H1_SSE_READ_BUFFER_BYTES during an event stream. */
  buf: Uint8Array<ArrayBuffer>;
  /** Unconsumed bytes are buf[start, end). */
  start: number;
  end: number;
  /** The read kept pending while idle (into buf at 0); the parser's first read after checkout. */
  pending: Promise<number | null> | null;
  /** The pending read settled (bytes or EOF) before the parser took it over. */
  arrived: boolean;
  idle: boolean;
  idleSince: number;
  closed: boolean;
}

/** Reads more bytes after the unconsumed ones; false at EOF. */
export async function fill(c: Conn, origin: string): Promise<boolean> {
  return filled(c, await startFill(c, origin));
}

/** Starts the read `fill` waits for (bytes go after the unconsumed ones); null at EOF. */
export function startFill(c: Conn, origin: string): Promise<number | null> {
  const p = c.pending;
  if (p !== null) {
    c.pending = null; // the idle read, into buf at 0 (start = end = 0 while pooled)
    return p;
  }
  if (c.start > 0) {
    c.buf.copyWithin(0, c.start, c.end);
    c.end -= c.start;
    c.start = 0;
  }
  if (c.end === c.buf.length) {
    throw new H1Error(`upstream ${origin}: framing line longer than the read buffer`);
  }
  return c.socket.read(c.buf.subarray(c.end));
}

/** Accounts a finished read; false at EOF. */
export function filled(c: Conn, n: number | null): boolean {
  if (n === null) return false;
  c.end += n;
  return true;
}
