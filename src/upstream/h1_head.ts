/**
 * Reading and parsing an HTTP/1.1 response head (status line, fields), and
 * what it says about the body: its framing (RFC 9112 §6.3), whether the
 * connection may be reused, and that no content coding was applied.
 */
import { CR, FIELD_VALUE, LF, listTokens, TOKEN, trimOws } from "./h1_syntax.ts";
import { type Conn, fill, H1Error } from "./h1_conn.ts";

const STATUS_LINE = /^HTTP\/1\.([01]) ([0-9]{3})(?: ([\t\x20-\x7e\x80-\xff]*))?$/;

export const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

export interface Head {
  minor: number;
  status: number;
  statusText: string;
  headers: Headers;
}

/**
 * Reads one response head up to and including its empty line. A head that arrives in one
 * read is returned as a view of the connection buffer (parse it before the next read);
 * a longer one is collected in a separate buffer grown up to `max`.
 */
export async function readHead(c: Conn, max: number, origin: string): Promise<Uint8Array> {
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

export function parseHead(text: string, origin: string): Head {
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

export function connectionReusable(head: Head): boolean {
  const tokens = listTokens(head.headers.get("connection"));
  if (tokens.includes("close")) return false;
  return head.minor === 1 || tokens.includes("keep-alive");
}

/** RFC 9112 §6.3 for a response that has a body. */
export function bodyFraming(
  head: Head,
  origin: string,
): { chunked: boolean; length: number | null } {
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
export function refuseContentCodings(headers: Headers, origin: string): void {
  for (const coding of listTokens(headers.get("content-encoding"))) {
    if (coding !== "identity") {
      throw new H1Error(`upstream ${origin}: content-encoding was not asked for`);
    }
  }
}

export const ascii = new TextDecoder();

export function latin1(bytes: Uint8Array): string {
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
