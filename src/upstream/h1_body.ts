/**
 * Response bodies: the exchange that owns a connection until its body ends,
 * the three framings (content-length, chunked, read-to-EOF) decoded from the
 * connection buffer, and the pull-driven body stream and source over them.
 */
import { concatBytes } from "../aci/mod.ts";
import { CR, LF } from "./h1_syntax.ts";
import { type Conn, filled, H1Error, startFill } from "./h1_conn.ts";

/** One request/response on one connection; ends exactly once, freeing or closing the socket. */
export class Exchange {
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

export const DONE = 1;

/** A view of body bytes in the connection buffer (valid until the next read), or a state. */
export type Step = Uint8Array<ArrayBuffer> | typeof NEED | typeof DONE;

export interface BodyDecoder {
  /** Consumes buffered bytes only; never reads the socket. */
  step(c: Conn): Step;
  /** Read-to-EOF framing: EOF is the end, and the connection cannot be reused. */
  readonly endsAtEof: boolean;
}

export class LengthBody implements BodyDecoder {
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

export class EofBody implements BodyDecoder {
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

export const END = 4;

/** RFC 9112 §7.1: strict hex sizes and CRLFs; extensions ignored; trailers read and dropped. */
export class ChunkedBody implements BodyDecoder {
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
 * their memory per held stream. Whoever reads the source must not read the stream.
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
// Long as one closure over shared state; each inner function is short.
export function bodyStream(
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
    return first === null ? null : more === null ? first.slice() : concatBytes(more, total);
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
