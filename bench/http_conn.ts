/**
 * A minimal HTTP/1.1 keep-alive client connection for the load generator.
 *
 * Why not `fetch`: the generator shares a core with the mock upstream, and a
 * raw socket writing pre-encoded requests costs a fraction of `fetch`, so the
 * generator does not cap the fastest path (the bare proxy) and flatter the
 * gateway's ratio to it. Handles `content-length` and `chunked` bodies; one
 * request at a time per connection (no pipelining).
 */

export interface RawResponse {
  status: number;
  /** The `Server-Timing` header, when present. */
  serverTiming: string | null;
  /** The `x-receipt-id` header, when present. */
  receiptId: string | null;
  bodyBytes: number;
}

const CRLF2 = [13, 10, 13, 10];
const latin1 = new TextDecoder("latin1");

function indexOfSeq(buf: Uint8Array, seq: number[], from: number, end: number): number {
  outer: for (let i = from; i <= end - seq.length; i++) {
    for (let j = 0; j < seq.length; j++) if (buf[i + j] !== seq[j]) continue outer;
    return i;
  }
  return -1;
}

/** Encodes one request once; the same bytes are written for every send. */
export function encodeRequest(
  url: URL,
  opts: { method?: string; headers?: Record<string, string>; body?: string },
): Uint8Array {
  const body = new TextEncoder().encode(opts.body ?? "");
  const lines = [
    `${opts.method ?? "POST"} ${url.pathname}${url.search} HTTP/1.1`,
    `host: ${url.host}`,
  ];
  for (const [k, v] of Object.entries(opts.headers ?? {})) lines.push(`${k}: ${v}`);
  lines.push(`content-length: ${body.length}`);
  const head = new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n");
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

export class HttpConn {
  #conn: Deno.TcpConn;
  #buf = new Uint8Array(256 * 1024);
  /** Unconsumed bytes are `#buf[#start, #end)`. */
  #start = 0;
  #end = 0;

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
  }

  static async open(url: URL): Promise<HttpConn> {
    const conn = await Deno.connect({ hostname: url.hostname, port: Number(url.port) });
    conn.setNoDelay(true);
    return new HttpConn(conn);
  }

  close(): void {
    try {
      this.#conn.close();
    } catch {
      // already closed
    }
  }

  async #fill(): Promise<void> {
    if (this.#start > 0 && this.#start === this.#end) this.#start = this.#end = 0;
    if (this.#end === this.#buf.length) {
      if (this.#start === 0) throw new Error("response head or chunk too large");
      this.#buf.copyWithin(0, this.#start, this.#end);
      this.#end -= this.#start;
      this.#start = 0;
    }
    const n = await this.#conn.read(this.#buf.subarray(this.#end));
    if (n === null) throw new Error("connection closed by server");
    this.#end += n;
  }

  async #line(): Promise<string> {
    let i;
    while ((i = indexOfSeq(this.#buf, [13, 10], this.#start, this.#end)) < 0) await this.#fill();
    const s = latin1.decode(this.#buf.subarray(this.#start, i));
    this.#start = i + 2;
    return s;
  }

  async #skip(n: number): Promise<void> {
    while (n > 0) {
      if (this.#start === this.#end) await this.#fill();
      const take = Math.min(n, this.#end - this.#start);
      this.#start += take;
      n -= take;
    }
  }

  /** Sends `req` and reads the whole response (its body is counted, not kept). */
  async request(req: Uint8Array): Promise<RawResponse> {
    let off = 0;
    while (off < req.length) off += await this.#conn.write(req.subarray(off));
    let h;
    while ((h = indexOfSeq(this.#buf, CRLF2, this.#start, this.#end)) < 0) await this.#fill();
    const head = latin1.decode(this.#buf.subarray(this.#start, h)).split("\r\n");
    this.#start = h + 4;
    const status = Number(head[0].split(" ")[1]);
    let length = -1;
    let chunked = false;
    let serverTiming: string | null = null;
    let receiptId: string | null = null;
    for (let i = 1; i < head.length; i++) {
      const c = head[i].indexOf(":");
      const name = head[i].slice(0, c).toLowerCase();
      const value = head[i].slice(c + 1).trim();
      if (name === "content-length") length = Number(value);
      else if (name === "transfer-encoding") chunked = value.toLowerCase() === "chunked";
      else if (name === "server-timing") serverTiming = value;
      else if (name === "x-receipt-id") receiptId = value;
    }
    let bodyBytes = 0;
    if (chunked) {
      for (;;) {
        const size = parseInt(await this.#line(), 16);
        if (!Number.isInteger(size)) throw new Error("bad chunk size");
        if (size === 0) {
          while ((await this.#line()) !== ""); // trailers
          break;
        }
        await this.#skip(size + 2);
        bodyBytes += size;
      }
    } else if (length >= 0) {
      await this.#skip(length);
      bodyBytes = length;
    } else {
      throw new Error("response without a length (connection-delimited bodies unsupported)");
    }
    return { status, serverTiming, receiptId, bodyBytes };
  }
}
