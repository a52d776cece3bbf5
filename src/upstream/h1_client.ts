/**
 * A small HTTP/1.1 client over injected sockets, for upstream requests.
 * Deno's global `fetch` holds ~125 KB RSS per open stream and spends ~65 µs of
 * main-thread CPU per request; a raw socket read into one 4 KiB buffer per
 * connection holds ~80 KB. This client does only what the gateway needs:
 * fixed-length request bodies, RFC 9112 response framing (content-length,
 * chunked, read-to-EOF), identity content only (coded answers are refused),
 * a per-origin keep-alive pool and abort signals. It never retries (resending a POST could
 * run an inference twice) and uses no timers.
 *
 * Error messages name the failure and the origin, never header values or body
 * bytes: prompts and API keys must not end up in logs.
 */

import { GatewayError } from "../http/errors.ts";

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

export interface H1RequestInit {
  method?: string;
  headers?: HeadersInit;
  body?: Uint8Array | string | null;
  signal?: AbortSignal;
  /** How to connect (default: the client's `connect`); connections are pooled per connector. */
  connector?: H1Connector;
  /**
   * Called once the first request bytes were handed to the connection (not when the
   * connection failed before that, e.g. a pin mismatch): the receipt's `request.forwarded`.
   */
  onWritten?: () => void;
  /**
   * Connections are reused only among requests with the same partition (the gateway
   * passes the API key's id): whatever an upstream sends out of turn on a kept-alive
   * connection can then reach only the same key's next request, never another key's.
   */
  partition?: string;
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

export const H1_DEFAULT_MAX_IDLE_PER_ORIGIN = 64;
export const H1_DEFAULT_MAX_IDLE_TOTAL = 512;
export const H1_DEFAULT_IDLE_TIMEOUT_MS = 4000;
export const H1_DEFAULT_MAX_HEADER_BYTES = 64 * 1024;
/** Per-connection read buffer: an SSE event is usually a few hundred bytes. */
export const H1_READ_BUFFER_BYTES = 4 * 1024;
/**
 * The read buffer while an event stream (`text/event-stream`) is read: such a
 * body may stay open for minutes delivering events of a few hundred bytes,
 * and its buffer is held all that time (hundreds of streams at once).
 */
export const H1_SSE_READ_BUFFER_BYTES = 1024;
/** Bodies up to this size go out in the same write as the head. */
const SINGLE_WRITE_BYTES = 64 * 1024;

const CR = 0x0d;
const LF = 0x0a;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Field values as RFC 9110 allows them (no CTLs but HTAB), obs-text included. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const STATUS_LINE = /^HTTP\/1\.([01]) ([0-9]{3})(?: ([\t\x20-\x7e\x80-\xff]*))?$/;
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
/** Methods `fetch` upper-cases; others are sent as given, as `fetch` does. */
const NORMALIZED_METHODS = new Set(["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"]);
/** CONNECT would turn the connection into a tunnel; TRACE/TRACK echo credentials. */
const FORBIDDEN_METHODS = new Set(["CONNECT", "TRACE", "TRACK"]);
/** Connection management and framing belong to this client, not the caller. */
const MANAGED_REQUEST_HEADERS = new Set([
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
]);
/** Marks errors this module made, so they are not wrapped a second time. */
class H1Error extends TypeError {}

interface Conn {
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

interface PreparedRequest {
  target: H1Target;
  key: string;
  connector: H1Connector | null;
  /** `host:port`, for error messages (never the path: queries can carry secrets). */
  origin: string;
  method: string;
  /** Head, or head + body when the body is small. */
  first: Uint8Array;
  /** A large body, written after the head. */
  rest: Uint8Array | null;
}

interface Head {
  minor: number;
  status: number;
  statusText: string;
  headers: Headers;
}

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
  const { now } = opts;

  /** Idle connections per origin key, oldest first. */
  const pools = new Map<string, Conn[]>();
  /** Per connector id: bumped by `drop`, so connections opened before it are not pooled again. */
  const generations = new Map<string, number>();
  const defaultConnector: H1Connector = { id: "", connect: opts.connect };
  /** Aborted by `close()`: ends connects still in progress. */
  const closing = new AbortController();
  let open = 0;
  let idle = 0;
  let closed = false;

  function closeConn(c: Conn): void {
    if (c.closed) return;
    if (c.idle) unpool(c);
    c.closed = true;
    open--;
    try {
      c.socket.close();
    } catch { /* already closed by the runtime */ }
  }

  function unpool(c: Conn): void {
    c.idle = false;
    idle--;
    const list = pools.get(c.key);
    if (!list) return;
    const i = list.indexOf(c);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) pools.delete(c.key);
  }

  function release(c: Conn): void {
    // Leftover bytes after a complete response mean the server and we disagree on framing.
    if (
      closed || c.closed || maxIdle === 0 || idle >= maxIdleTotal || c.start !== c.end ||
      c.generation !== (generations.get(c.connectorId) ?? 0)
    ) {
      closeConn(c);
      return;
    }
    const t = now();
    const old = pools.get(c.key);
    if (old) {
      while (old.length > 0 && t - old[0].idleSince > idleTimeoutMs) closeConn(old[0]);
      if (old.length >= maxIdle) closeConn(old[0]); // the oldest is the likeliest to be stale
    }
    let list = pools.get(c.key); // closeConn drops an emptied list
    if (!list) pools.set(c.key, list = []);
    c.start = c.end = 0;
    if (c.buf.length !== H1_READ_BUFFER_BYTES) c.buf = new Uint8Array(H1_READ_BUFFER_BYTES);
    c.idle = true;
    c.idleSince = t;
    list.push(c);
    idle++;
    watch(c);
  }

  /**
   * Keeps one read pending from the moment a connection is free until the parser takes it
   * over after the request is written: bytes (or EOF) arriving in between were sent for no
   * request, so an idle connection is dropped and a request being written fails.
   */
  function watch(c: Conn): void {
    const p = c.socket.read(c.buf);
    c.pending = p;
    c.arrived = false;
    const settled = () => {
      if (c.pending !== p) return;
      c.arrived = true;
      if (c.idle) closeConn(c);
    };
    p.then(settled, settled);
  }

  /** The newest pooled connection; those past the idle timeout close. */
  function checkout(key: string): Conn | null {
    const list = pools.get(key);
    if (!list) return null;
    const t = now();
    for (let i = list.length - 1; i >= 0; i--) {
      const c = list[i];
      const age = t - c.idleSince;
      if (age > idleTimeoutMs) {
        // This one and all older ones (toward the front) are stale.
        for (const old of list.slice(0, i + 1)) closeConn(old);
        return null;
      }
      unpool(c);
      return c;
    }
    return null;
  }

  async function openConn(req: PreparedRequest, signal: AbortSignal | undefined): Promise<Conn> {
    let socket: H1Socket;
    const connector = req.connector ?? defaultConnector;
    const generation = generations.get(connector.id) ?? 0;
    const stop = signal ? AbortSignal.any([signal, closing.signal]) : closing.signal;
    try {
      socket = await raceAbort(connector.connect(req.target, stop), signal);
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      if (e instanceof GatewayError) throw e; // typed by the connector (pin, certificate)
      throw new H1Error(`upstream ${req.origin}: connect failed`, { cause: e });
    }
    open++;
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
    watch(c);
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
    if (closed) throw new H1Error("h1 client is closed");
    const req = prepare(url, init);
    const signal = init.signal;
    if (signal?.aborted) throw signal.reason;
    const c = checkout(req.key) ?? await openConn(req, signal);
    const ex = new Exchange(signal, (reuse) => reuse ? release(c) : closeConn(c));
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
      closed = true;
      closing.abort(new H1Error("h1 client is closed"));
      for (const list of [...pools.values()]) for (const c of [...list]) closeConn(c);
    },
    drop(connectorId) {
      generations.set(connectorId, (generations.get(connectorId) ?? 0) + 1);
      for (const list of [...pools.values()]) {
        for (const c of [...list]) if (c.connectorId === connectorId) closeConn(c);
      }
    },
    stats: () => ({ open, idle }),
  };
}

/** One request/response on one connection; ends exactly once, freeing or closing the socket. */
class Exchange {
  done = false;
  /** Ended by the abort signal (not by the body's end or a cancel). */
  aborted = false;
  controller: ReadableStreamDefaultController<Uint8Array<ArrayBuffer>> | null = null;
  readonly #signal: AbortSignal | undefined;
  readonly #end: (reuse: boolean) => void;

  constructor(signal: AbortSignal | undefined, end: (reuse: boolean) => void) {
    this.#signal = signal;
    this.#end = end;
    signal?.addEventListener("abort", this.#onAbort);
    if (signal?.aborted) this.#onAbort(); // aborted between the connect and here
  }

  #onAbort = () => {
    if (this.done) return;
    this.aborted = true;
    this.finish(false); // closing the socket also fails the read or write in progress
    this.controller?.error(this.#signal!.reason);
  };

  /** The signal's reason once this exchange was aborted by it. */
  abortReason(): unknown {
    return this.aborted ? this.#signal!.reason : undefined;
  }

  finish(reuse: boolean): void {
    if (this.done) return;
    this.done = true;
    this.#signal?.removeEventListener("abort", this.#onAbort);
    this.#end(reuse);
  }
}

const NEED = 0;
const DONE = 1;
/** A view of body bytes in the connection buffer (valid until the next read), or a state. */
type Step = Uint8Array<ArrayBuffer> | typeof NEED | typeof DONE;

interface BodyDecoder {
  /** Consumes buffered bytes only; never reads the socket. */
  step(c: Conn): Step;
  /** Read-to-EOF framing: EOF is the end, and the connection cannot be reused. */
  readonly endsAtEof: boolean;
}

class LengthBody implements BodyDecoder {
  readonly endsAtEof = false;
  #remaining: number;
  constructor(length: number) {
    this.#remaining = length;
  }
  step(c: Conn): Step {
    if (this.#remaining === 0) return DONE;
    const n = Math.min(c.end - c.start, this.#remaining);
    if (n === 0) return NEED;
    const view = c.buf.subarray(c.start, c.start + n);
    c.start += n;
    this.#remaining -= n;
    return view;
  }
}

class EofBody implements BodyDecoder {
  readonly endsAtEof = true;
  step(c: Conn): Step {
    if (c.start === c.end) return NEED;
    const view = c.buf.subarray(c.start, c.end);
    c.start = c.end;
    return view;
  }
}

const SIZE = 0;
const DATA = 1;
const DATA_END = 2;
const TRAILERS = 3;
const END = 4;

/** RFC 9112 §7.1: strict hex sizes and CRLFs; extensions ignored; trailers read and dropped. */
class ChunkedBody implements BodyDecoder {
  readonly endsAtEof = false;
  #state = SIZE;
  #remaining = 0;
  #trailerBytes = 0;
  readonly #maxTrailerBytes: number;
  readonly #origin: string;

  constructor(maxTrailerBytes: number, origin: string) {
    this.#maxTrailerBytes = maxTrailerBytes;
    this.#origin = origin;
  }

  step(c: Conn): Step {
    while (true) {
      switch (this.#state) {
        case SIZE: {
          const line = this.#line(c);
          if (line === null) return NEED;
          this.#remaining = this.#size(c.buf, line[0], line[1]);
          this.#state = this.#remaining === 0 ? TRAILERS : DATA;
          continue;
        }
        case DATA: {
          const n = Math.min(c.end - c.start, this.#remaining);
          if (n === 0) return NEED;
          const view = c.buf.subarray(c.start, c.start + n);
          c.start += n;
          this.#remaining -= n;
          if (this.#remaining === 0) this.#state = DATA_END;
          return view;
        }
        case DATA_END: {
          const avail = c.end - c.start;
          if (avail >= 1 && c.buf[c.start] !== CR) throw this.#bad("missing CRLF after chunk data");
          if (avail < 2) return NEED;
          if (c.buf[c.start + 1] !== LF) throw this.#bad("missing CRLF after chunk data");
          c.start += 2;
          this.#state = SIZE;
          continue;
        }
        case TRAILERS: {
          const line = this.#line(c);
          if (line === null) return NEED;
          if (line[0] === line[1]) {
            this.#state = END;
            return DONE;
          }
          this.#trailerBytes += line[1] - line[0] + 2;
          if (this.#trailerBytes > this.#maxTrailerBytes) throw this.#bad("trailers too large");
          continue;
        }
        default:
          return DONE;
      }
    }
  }

  /** The next CRLF-terminated line as [from, to) in c.buf, or null if not all buffered. */
  #line(c: Conn): [number, number] | null {
    for (let i = c.start; i < c.end; i++) {
      const b = c.buf[i];
      if (b === LF) throw this.#bad("bare LF in chunk framing");
      if (b === CR) {
        if (i + 1 === c.end) return null;
        if (c.buf[i + 1] !== LF) throw this.#bad("bare CR in chunk framing");
        const from = c.start;
        c.start = i + 2;
        return [from, i];
      }
    }
    return null;
  }

  #size(buf: Uint8Array, from: number, to: number): number {
    let size = 0;
    let i = from;
    for (; i < to; i++) {
      const d = hexDigit(buf[i]);
      if (d < 0) break;
      if (size > (Number.MAX_SAFE_INTEGER - d) / 16) throw this.#bad("chunk size too large");
      size = size * 16 + d;
    }
    if (i === from) throw this.#bad("malformed chunk size");
    // chunk-ext = *( BWS ";" ... ): whitespace may precede the ";", nothing else may follow.
    while (i < to && (buf[i] === 0x20 || buf[i] === 0x09)) i++;
    if (i < to && buf[i] !== 0x3b) throw this.#bad("malformed chunk size");
    return size;
  }

  #bad(what: string): H1Error {
    return new H1Error(`upstream ${this.#origin}: ${what}`);
  }
}

function hexDigit(b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x61 && b <= 0x66) return b - 0x57;
  if (b >= 0x41 && b <= 0x46) return b - 0x37;
  return -1;
}

/**
 * A response body's bytes without the stream machinery: `chunkReader` reads an
 * event stream through this instead of its `ReadableStream`, which saves a
 * stream read (a promise, a read request and their closures) per chunk and
 * about 1 KB per held stream. Whoever reads the source must not read the stream.
 */
export interface H1BodySource {
  /** The next bytes (a fresh copy), or null at the end; rejects on a failed or aborted read. */
  read(): Promise<Uint8Array<ArrayBuffer> | null>;
  /** Stops reading; the connection is closed (never reused half-read). */
  cancel(): void;
}

/**
 * A response whose body came off the connection: it also carries the body's source, so
 * an event stream can be read without the stream machinery (`bodySourceOf`).
 */
export class H1Response extends Response {
  readonly source: H1BodySource;
  constructor(
    body: ReadableStream<Uint8Array<ArrayBuffer>>,
    init: ResponseInit,
    source: H1BodySource,
  ) {
    super(body, init);
    this.source = source;
  }
}

/** The source behind a body this client streams (none for other responses). */
export function bodySourceOf(res: Response): H1BodySource | undefined {
  return res instanceof H1Response ? res.source : undefined;
}

/**
 * The response body: bytes are read from the socket only when the consumer asks
 * (highWaterMark 0), and each read hands out everything already buffered as one copy.
 */
function bodyStream(
  c: Conn,
  ex: Exchange,
  decoder: BodyDecoder,
  reusable: boolean,
  // The origin only: the request holds the sent body, which must not live as long as the answer.
  origin: string,
): { stream: ReadableStream<Uint8Array<ArrayBuffer>>; source: H1BodySource } {
  let ended = false;
  /** Everything buffered as one copy, or null when nothing is; ends the exchange at the end. */
  const take = (): Uint8Array<ArrayBuffer> | null => {
    let first: Uint8Array<ArrayBuffer> | null = null;
    let more: Uint8Array<ArrayBuffer>[] | null = null;
    let total = 0;
    while (true) {
      const s = decoder.step(c);
      if (s === NEED) break;
      if (s === DONE) {
        ended = true;
        ex.finish(reusable && !decoder.endsAtEof);
        break;
      }
      if (first === null) first = s;
      else (more ??= [first]).push(s);
      total += s.length;
    }
    return first === null ? null : more === null ? first.slice() : concat(more, total);
  };
  const failure = (e: unknown): unknown => {
    const aborted = ex.abortReason();
    if (aborted !== undefined) return aborted;
    ex.finish(false);
    return e instanceof H1Error ? e : new H1Error(`upstream ${origin}: read failed`, { cause: e });
  };
  /** Why a read cannot go on once the exchange ended before the body did. */
  const stopped = (): unknown =>
    ex.abortReason() ?? new H1Error(`upstream ${origin}: body cancelled`);
  const source: H1BodySource = {
    async read() {
      try {
        while (true) {
          const bytes = take();
          if (bytes !== null) return bytes;
          if (ended) return null;
          if (ex.done) throw stopped();
          // Not `await fill(…)`: a held stream then waits in one suspended function, not two.
          const more = filled(c, await startFill(c, origin));
          if (ex.done) throw stopped(); // aborted or cancelled during the read
          if (!more) {
            if (!decoder.endsAtEof) {
              throw new H1Error(`upstream ${origin}: connection closed before the body ended`);
            }
            ended = true;
            ex.finish(false);
          }
        }
      } catch (e) {
        throw failure(e);
      }
    },
    cancel() {
      ex.finish(false); // never reuse a half-read connection
    },
  };
  const stream = new ReadableStream<Uint8Array<ArrayBuffer>>({
    start(ctrl) {
      // Nothing is taken here: bytes that came with the head stay in the buffer for
      // the first read, whether through this stream or through the source.
      ex.controller = ctrl;
    },
    async pull(ctrl) {
      // A pull must enqueue, close or error: the stream does not call it again otherwise.
      try {
        const bytes = await source.read();
        if (bytes !== null) ctrl.enqueue(bytes);
        else ctrl.close();
      } catch (e) {
        if (!ex.aborted) ctrl.error(e); // an abort already errored the stream
      }
    },
    cancel: source.cancel,
  }, { highWaterMark: 0 });
  return { stream, source };
}

/** Reads more bytes after the unconsumed ones; false at EOF. */
async function fill(c: Conn, origin: string): Promise<boolean> {
  return filled(c, await startFill(c, origin));
}

/** Starts the read `fill` waits for (bytes go after the unconsumed ones); null at EOF. */
function startFill(c: Conn, origin: string): Promise<number | null> {
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
function filled(c: Conn, n: number | null): boolean {
  if (n === null) return false;
  c.end += n;
  return true;
}

/**
 * Reads one response head up to and including its empty line. A head that arrives in one
 * read is returned as a view of the connection buffer (parse it before the next read);
 * a longer one is collected in a separate buffer grown up to `max`.
 */
async function readHead(c: Conn, max: number, origin: string): Promise<Uint8Array> {
  let acc: Uint8Array | null = null;
  let accLen = 0;
  let state = 0; // how much of CR LF CR LF has been seen
  while (true) {
    if (c.start === c.end && !(await fill(c, origin))) {
      throw new H1Error(
        accLen === 0
          ? `upstream ${origin}: connection closed before the response`
          : `upstream ${origin}: connection closed in the response head`,
      );
    }
    const buf = c.buf;
    let i = c.start;
    for (; i < c.end && state < 4; i++) {
      const b = buf[i];
      state = b === CR
        ? (state === 2 ? 3 : 1)
        : b === LF && (state === 1 || state === 3)
        ? state + 1
        : 0;
    }
    const piece = buf.subarray(c.start, i);
    if (accLen + piece.length > max) {
      throw new H1Error(`upstream ${origin}: response head too large`);
    }
    c.start = i;
    if (state === 4 && acc === null) return piece;
    if (acc === null || accLen + piece.length > acc.length) {
      const grown = new Uint8Array(
        Math.min(max, Math.max(2 * accLen, accLen + piece.length, 1024)),
      );
      if (acc !== null) grown.set(acc.subarray(0, accLen));
      acc = grown;
    }
    acc.set(piece, accLen);
    accLen += piece.length;
    if (state === 4) return acc.subarray(0, accLen);
  }
}

function parseHead(text: string, origin: string): Head {
  const lines = text.split("\r\n");
  lines.length -= 2; // the head ends with CRLF CRLF
  const m = STATUS_LINE.exec(lines[0]);
  if (!m) throw new H1Error(`upstream ${origin}: malformed status line`);
  const headers = new Headers();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    // obs-fold (a line starting with SP/HTAB) fails the token test: a gateway may reject it.
    if (!TOKEN.test(name)) throw new H1Error(`upstream ${origin}: malformed response header`);
    const value = trimOws(line.slice(colon + 1));
    if (!FIELD_VALUE.test(value)) {
      throw new H1Error(`upstream ${origin}: malformed value in response header "${name}"`);
    }
    headers.append(name, value);
  }
  return { minor: Number(m[1]), status: Number(m[2]), statusText: m[3] ?? "", headers };
}

function connectionReusable(head: Head): boolean {
  const tokens = listTokens(head.headers.get("connection"));
  if (tokens.includes("close")) return false;
  return head.minor === 1 || tokens.includes("keep-alive");
}

/** RFC 9112 §6.3 for a response that has a body. */
function bodyFraming(head: Head, origin: string): { chunked: boolean; length: number | null } {
  const te = head.headers.get("transfer-encoding");
  if (te !== null) {
    const codings = listTokens(te);
    // Only "chunked" is decoded as a transfer coding; anything else is refused outright.
    if (codings.length !== 1 || codings[0] !== "chunked") {
      throw new H1Error(`upstream ${origin}: unsupported transfer-encoding`);
    }
    return { chunked: true, length: null };
  }
  const cl = head.headers.get("content-length");
  if (cl === null) return { chunked: false, length: null };
  let length: number | null = null;
  for (const part of cl.split(",")) {
    const v = trimOws(part);
    const n = /^[0-9]+$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n) || (length !== null && n !== length)) {
      throw new H1Error(`upstream ${origin}: invalid content-length`);
    }
    length = n;
  }
  return { chunked: false, length };
}

/**
 * Every request asks for `identity`; a coded answer anyway is refused, not decoded: a
 * 1 MiB gzip body can inflate to gigabytes, and no bound on the decoder is as simple.
 */
function refuseContentCodings(headers: Headers, origin: string): void {
  for (const coding of listTokens(headers.get("content-encoding"))) {
    if (coding !== "identity") {
      throw new H1Error(`upstream ${origin}: content-encoding was not asked for`);
    }
  }
}

function prepare(url: string, init: H1RequestInit): PreparedRequest {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new H1Error("invalid URL");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new H1Error(`unsupported URL scheme ${u.protocol}`);
  }
  if (u.username !== "" || u.password !== "") throw new H1Error("URL must not include credentials");
  const tls = u.protocol === "https:";
  const port = u.port === "" ? (tls ? 443 : 80) : Number(u.port);
  const hostname = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
  const origin = `${u.hostname}:${port}`;

  const method = normalizeMethod(init.method ?? "GET");
  let body: Uint8Array | null = null;
  if (init.body !== undefined && init.body !== null) {
    if (method === "GET" || method === "HEAD") throw new H1Error(`${method} request with a body`);
    body = typeof init.body === "string" ? new TextEncoder().encode(init.body) : init.body;
  }
  const needsLength = body !== null || method === "POST" || method === "PUT" ||
    method === "PATCH";
  const length = body?.length ?? 0;

  let head = `${method} ${u.pathname}${u.search} HTTP/1.1\r\n`;
  let fields = "";
  let host = u.host;
  let hostSet = false;
  let acceptEncoding = false;
  for (const [name, value] of headerPairs(init.headers)) {
    const lower = name.toLowerCase();
    if (MANAGED_REQUEST_HEADERS.has(lower)) {
      throw new H1Error(`request header "${lower}" is managed by the client`);
    }
    if (lower === "host") {
      if (hostSet) throw new H1Error("more than one host header");
      hostSet = true;
      host = value;
      continue;
    }
    if (lower === "content-length") {
      if (value !== String(length) || !needsLength) {
        throw new H1Error("content-length does not match the body");
      }
      continue; // sent below, once
    }
    if (lower === "accept-encoding") {
      // Coded answers are refused (refuseContentCodings), so none may be asked for.
      if (value.toLowerCase() !== "identity") {
        throw new H1Error('request header "accept-encoding" must be identity');
      }
      acceptEncoding = true;
    }
    fields += `${name}: ${value}\r\n`;
  }
  head += `host: ${host}\r\n${fields}`;
  if (needsLength) head += `content-length: ${length}\r\n`;
  if (!acceptEncoding) head += "accept-encoding: identity\r\n";
  head += "\r\n";

  const together = body !== null && body.length <= SINGLE_WRITE_BYTES;
  const first = new Uint8Array(head.length + (together ? length : 0));
  for (let i = 0; i < head.length; i++) first[i] = head.charCodeAt(i);
  if (together) first.set(body!, head.length);
  return {
    target: { hostname, port, tls },
    // Pool key: where, how (the connector: a pin), and for whom (the partition: an API key).
    key: `${tls}:${hostname}:${port}:${init.connector?.id ?? ""}:${init.partition ?? ""}`,
    connector: init.connector ?? null,
    origin,
    method,
    first,
    rest: together ? null : body,
  };
}

function normalizeMethod(method: string): string {
  if (!TOKEN.test(method)) throw new H1Error("invalid method");
  const upper = method.toUpperCase();
  if (FORBIDDEN_METHODS.has(upper)) throw new H1Error(`method ${upper} is not allowed`);
  return NORMALIZED_METHODS.has(upper) ? upper : method;
}

/**
 * Caller headers as validated pairs. Checked here rather than by `Headers`, whose errors
 * quote the offending value (an API key must not end up in an error message).
 */
function headerPairs(init: HeadersInit | undefined): [string, string][] {
  if (init === undefined) return [];
  const raw: unknown[] = init instanceof Headers
    ? [...init]
    : Symbol.iterator in init
    ? [...(init as Iterable<unknown>)]
    : Object.entries(init);
  const out: [string, string][] = [];
  for (const pair of raw) {
    if (!Array.isArray(pair) || pair.length !== 2) {
      throw new H1Error("request headers must be name/value pairs");
    }
    const [name, rawValue] = pair;
    if (typeof name !== "string" || !TOKEN.test(name)) {
      throw new H1Error("invalid request header name");
    }
    const value = trimOws(String(rawValue));
    // CR, LF and NUL would let a value inject headers; other CTLs are invalid too (RFC 9110).
    if (!FIELD_VALUE.test(value)) {
      throw new H1Error(`invalid value for request header "${name.toLowerCase()}"`);
    }
    out.push([name, value]);
  }
  return out;
}

/** Writes all of `bytes`; `onFirst` runs once the first of them were accepted. */
async function writeAll(socket: H1Socket, bytes: Uint8Array, onFirst?: () => void): Promise<void> {
  let off = 0;
  while (off < bytes.length) {
    const n = await socket.write(off === 0 ? bytes : bytes.subarray(off));
    if (!(n > 0)) throw new H1Error("write made no progress");
    if (off === 0) onFirst?.();
    off += n;
  }
}

/** Bytes that came before the request was complete answer some other request, or none. */
function unsolicited(origin: string): H1Error {
  return new H1Error(`upstream ${origin}: response bytes arrived before the request was sent`);
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

function listTokens(value: string | null): string[] {
  if (value === null) return [];
  return value.split(",").map((t) => trimOws(t).toLowerCase()).filter((t) => t !== "");
}

function trimOws(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && (s.charCodeAt(a) === 0x20 || s.charCodeAt(a) === 0x09)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 0x20 || s.charCodeAt(b - 1) === 0x09)) b--;
  return s.slice(a, b);
}

const ascii = new TextDecoder();

function latin1(bytes: Uint8Array): string {
  // Heads are nearly always ASCII, where one native decode beats building the string by hand.
  let high = false;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] > 0x7f) {
      high = true;
      break;
    }
  }
  if (!high) return ascii.decode(bytes);
  let s = "";
  for (let i = 0; i < bytes.length; i += 4096) {
    s += String.fromCharCode(...bytes.subarray(i, i + 4096));
  }
  return s;
}

function concat(parts: Uint8Array[], total: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function nonNegativeInteger(v: number, name: string): number {
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new RangeError(`${name} must be a non-negative integer`);
  }
  return v;
}
