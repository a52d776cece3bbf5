/**
 * A small HTTP/1.1 client over injected sockets, for upstream requests.
 * Deno's global `fetch` holds much more memory per open stream and more
 * main-thread CPU per request than a raw socket read into one 4 KiB buffer
 * per connection (docs/decisions/023-verified-path-rss.md). This client does
 * only what the gateway needs: fixed-length request bodies, RFC 9112 response
 * framing (content-length, chunked, read-to-EOF), identity content only (coded
 * answers are refused), a keep-alive pool per (origin, connector, partition)
 * and abort signals. It never retries (resending a POST could run an inference
 * twice) and uses no timers (deadlines are the caller's: forward.ts, body_read.ts).
 *
 * By concern: the connection and its reads (h1_conn.ts), the pool
 * (h1_pool.ts), request writing (h1_request.ts), head parsing (h1_head.ts),
 * body framings (h1_body.ts); this file ties one exchange together.
 *
 * Error messages name the failure and the origin, never header values or body
 * bytes: prompts and API keys must not end up in logs.
 */
import { GatewayError } from "../http/mod.ts";
import {
  type Conn,
  H1_READ_BUFFER_BYTES,
  H1_SSE_READ_BUFFER_BYTES,
  type H1Connect,
  type H1Connector,
  H1Error,
  type H1Socket,
} from "./h1_conn.ts";
import { H1Pool } from "./h1_pool.ts";
import {
  type H1RequestInit,
  prepare,
  type PreparedRequest,
  unsolicited,
  writeAll,
} from "./h1_request.ts";
import {
  bodyFraming,
  connectionReusable,
  type Head,
  latin1,
  NULL_BODY_STATUSES,
  parseHead,
  readHead,
  refuseContentCodings,
} from "./h1_head.ts";
import {
  type BodyDecoder,
  bodyStream,
  ChunkedBody,
  EofBody,
  Exchange,
  H1Response,
  LengthBody,
} from "./h1_body.ts";

export {
  H1_READ_BUFFER_BYTES,
  H1_SSE_READ_BUFFER_BYTES,
  type H1Connect,
  type H1Connector,
  type H1Socket,
  type H1Target,
} from "./h1_conn.ts";
export type { H1RequestInit } from "./h1_request.ts";
export { bodySourceOf, type H1BodySource, H1Response } from "./h1_body.ts";

export interface H1ClientOptions {
  connect: H1Connect;
  /** Monotonic or wall ms clock, for idle ages (no timers are used). */
  now: () => number;
  /** Idle connections kept per origin and partition (default 64). */
  maxIdlePerOrigin?: number;
  /** Idle connections kept in all (default 512): partitions multiply the pools. */
  maxIdleTotal?: number;
  /** A pooled connection idle longer than this is closed instead of reused (default 4000 ms). */
  idleTimeoutMs?: number;
  /** Largest response head (status line + headers) accepted (default 64 KiB). */
  maxHeaderBytes?: number;
}

export interface H1Client {
  /** fetch-compatible for what the gateway uses. */
  fetch(url: string, init: H1RequestInit): Promise<Response>;
  /** Closes idle connections; later fetches reject; in-flight ones finish and then close. */
  close(): void;
  /**
   * Retires a connector's connections (its upstream session was invalidated): idle ones
   * close now, in-flight ones close when their exchange ends instead of being pooled.
   */
  drop(connectorId: string): void;
  /** For tests: open sockets (idle + in use), idle sockets. */
  stats(): { open: number; idle: number };
}

const H1_DEFAULT_MAX_IDLE_PER_ORIGIN = 64;

const H1_DEFAULT_MAX_IDLE_TOTAL = 512;

const H1_DEFAULT_IDLE_TIMEOUT_MS = 4000;

const H1_DEFAULT_MAX_HEADER_BYTES = 64 * 1024;

// Long as one closure over shared state; each inner function is short.
export function createH1Client(opts: H1ClientOptions): H1Client {
  const maxIdle = nonNegativeInteger(
    opts.maxIdlePerOrigin ?? H1_DEFAULT_MAX_IDLE_PER_ORIGIN,
    "maxIdlePerOrigin",
  );
  const maxIdleTotal = nonNegativeInteger(
    opts.maxIdleTotal ?? H1_DEFAULT_MAX_IDLE_TOTAL,
    "maxIdleTotal",
  );
  const idleTimeoutMs = opts.idleTimeoutMs ?? H1_DEFAULT_IDLE_TIMEOUT_MS;
  if (typeof idleTimeoutMs !== "number" || !(idleTimeoutMs >= 0) || idleTimeoutMs === Infinity) {
    throw new RangeError("idleTimeoutMs must be a finite non-negative number");
  }
  const maxHeaderBytes = nonNegativeInteger(
    opts.maxHeaderBytes ?? H1_DEFAULT_MAX_HEADER_BYTES,
    "maxHeaderBytes",
  );
  if (maxHeaderBytes === 0) throw new RangeError("maxHeaderBytes must be positive");
  const pool = new H1Pool({ maxIdle, maxIdleTotal, idleTimeoutMs }, opts.now);
  const defaultConnector: H1Connector = { id: "", connect: opts.connect };
  /** Aborted by `close()`: ends connects still in progress. */
  const closing = new AbortController();

  async function openConn(req: PreparedRequest, signal: AbortSignal | undefined): Promise<Conn> {
    let socket: H1Socket;
    const connector = req.connector ?? defaultConnector;
    const generation = pool.generation(connector.id);
    const stop = signal ? AbortSignal.any([signal, closing.signal]) : closing.signal;
    try {
      socket = await raceAbort(connector.connect(req.target, stop), signal);
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      if (e instanceof GatewayError) throw e; // typed by the connector (pin, certificate)
      throw new H1Error(`upstream ${req.origin}: connect failed`, { cause: e });
    }
    const c: Conn = {
      socket,
      key: req.key,
      connectorId: connector.id,
      generation,
      buf: new Uint8Array(H1_READ_BUFFER_BYTES),
      start: 0,
      end: 0,
      pending: null,
      arrived: false,
      idle: false,
      idleSince: 0,
      closed: false,
    };
    pool.adopt(c);
    return c;
  }

  /**
   * Writes the request; bytes that arrived on the connection before its last write was
   * issued answer no request of ours (or a previous one), so the request fails and the
   * connection closes. The check sees what the runtime has read so far: HTTP/1.1 cannot
   * tell a late byte of an earlier answer from an early one of this answer, which is why
   * pools are also partitioned by the caller's `partition` (the API key).
   */
  async function writeRequest(
    c: Conn,
    req: PreparedRequest,
    onWritten: (() => void) | undefined,
  ): Promise<void> {
    if (c.arrived) throw unsolicited(req.origin);
    await writeAll(c.socket, req.first, onWritten);
    if (req.rest) {
      if (c.arrived) throw unsolicited(req.origin);
      await writeAll(c.socket, req.rest);
    }
  }

  async function fetch(url: string, init: H1RequestInit): Promise<Response> {
    if (pool.closed) throw new H1Error("h1 client is closed");
    const req = prepare(url, init);
    const signal = init.signal;
    if (signal?.aborted) throw signal.reason;
    const c = pool.checkout(req.key) ?? await openConn(req, signal);
    const ex = new Exchange(signal, (reuse) => reuse ? pool.release(c) : pool.close(c));
    let stage = "write";
    try {
      await writeRequest(c, req, init.onWritten);
      stage = "read";
      let budget = maxHeaderBytes;
      let head: Head;
      while (true) {
        const bytes = await readHead(c, budget, req.origin);
        budget -= bytes.length;
        head = parseHead(latin1(bytes), req.origin);
        if (head.status >= 200) break;
        if (head.status === 101) {
          throw new H1Error(`upstream ${req.origin}: unexpected 101 response`);
        }
        if (head.status < 100) break;
        // Interim 1xx (100 Continue, 103 Early Hints): no body, the final answer follows.
      }
      if (ex.done) throw abortedOr(signal, req.origin);
      if (head.status < 200 || head.status > 599) {
        throw new H1Error(`upstream ${req.origin}: status ${head.status} out of range`);
      }
      return respond(req, head, c, ex);
    } catch (e) {
      ex.finish(false);
      if (signal?.aborted) throw signal.reason;
      if (e instanceof H1Error) throw e;
      throw new H1Error(`upstream ${req.origin}: ${stage} failed`, { cause: e });
    }
  }

  function respond(req: PreparedRequest, head: Head, c: Conn, ex: Exchange): Response {
    const { status, statusText, headers } = head;
    let reusable = connectionReusable(head);
    const init = { status, statusText, headers };
    if (req.method === "HEAD" || status === 204 || status === 304) {
      ex.finish(reusable);
      return new Response(null, init);
    }
    const framing = bodyFraming(head, req.origin);
    if (framing.chunked && headers.has("content-length")) {
      // Both framings: transfer-encoding wins, and a connection that carried such a
      // message is not trusted again (request smuggling).
      headers.delete("content-length");
      reusable = false;
    }
    // RFC 9112 §6.1: transfer-encoding in an HTTP/1.0 message is faulty framing; close after.
    if (framing.chunked && head.minor === 0) reusable = false;
    if (NULL_BODY_STATUSES.has(status)) {
      // 205: a body must not be sent; if one is framed anyway, drop the connection rather
      // than read it.
      ex.finish(reusable && framing.length === 0);
      return new Response(null, init);
    }
    refuseContentCodings(headers, req.origin);
    const length = framing.chunked ? null : framing.length;
    if (length !== null && c.end - c.start >= length) {
      // The whole body came with the head (the usual small JSON answer): hand it over as
      // bytes, with no stream machinery, and free the connection at once.
      const bytes = c.buf.slice(c.start, c.start + length);
      c.start += length;
      ex.finish(reusable);
      return new Response(bytes, init);
    }
    if (
      c.buf.length > H1_SSE_READ_BUFFER_BYTES && c.end - c.start <= H1_SSE_READ_BUFFER_BYTES &&
      headers.get("content-type")?.toLowerCase().startsWith("text/event-stream")
    ) {
      const small = new Uint8Array(H1_SSE_READ_BUFFER_BYTES);
      small.set(c.buf.subarray(c.start, c.end));
      c.end -= c.start;
      c.start = 0;
      c.buf = small;
    }
    const decoder: BodyDecoder = framing.chunked
      ? new ChunkedBody(maxHeaderBytes, req.origin)
      : framing.length !== null
      ? new LengthBody(framing.length)
      : new EofBody();
    const { stream, source } = bodyStream(c, ex, decoder, reusable, req.origin);
    return new H1Response(stream, init, source);
  }

  return {
    fetch,
    close() {
      pool.closeAll();
      closing.abort(new H1Error("h1 client is closed"));
    },
    drop: (connectorId) => pool.drop(connectorId),
    stats: () => ({ open: pool.open, idle: pool.idle }),
  };
}

/** Settles with `p`, or rejects with the abort reason first; a socket opened too late is closed. */
function raceAbort(p: Promise<H1Socket>, signal: AbortSignal | undefined): Promise<H1Socket> {
  if (!signal) return p;
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then((socket) => {
      signal.removeEventListener("abort", onAbort);
      if (!signal.aborted) return resolve(socket);
      try {
        socket.close();
      } catch { /* already closed */ }
    }, (e) => {
      signal.removeEventListener("abort", onAbort);
      reject(e);
    });
  });
}

function abortedOr(signal: AbortSignal | undefined, origin: string): unknown {
  return signal?.aborted ? signal.reason : new H1Error(`upstream ${origin}: exchange ended`);
}

function nonNegativeInteger(v: number, name: string): number {
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new RangeError(`${name} must be a non-negative integer`);
  }
  return v;
}
