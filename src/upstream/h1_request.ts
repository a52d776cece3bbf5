/**
 * Writing an HTTP/1.1 request: the URL, method and caller headers validated
 * (errors never quote a header value: API keys must not reach logs), the head
 * serialised with the framing this client manages, and the bytes written.
 */
import { FIELD_VALUE, TOKEN, trimOws } from "./h1_syntax.ts";
import { type H1Connector, H1Error, type H1Socket, type H1Target } from "./h1_conn.ts";

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

/** Bodies up to this size go out in the same write as the head. */
const SINGLE_WRITE_BYTES = 64 * 1024;

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

export interface PreparedRequest {
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

export function prepare(url: string, init: H1RequestInit): PreparedRequest {
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
export async function writeAll(
  socket: H1Socket,
  bytes: Uint8Array,
  onFirst?: () => void,
): Promise<void> {
  let off = 0;
  while (off < bytes.length) {
    const n = await socket.write(off === 0 ? bytes : bytes.subarray(off));
    if (!(n > 0)) throw new H1Error("write made no progress");
    if (off === 0) onFirst?.();
    off += n;
  }
}

/** Bytes that came before the request was complete answer some other request, or none. */
export function unsolicited(origin: string): H1Error {
  return new H1Error(`upstream ${origin}: response bytes arrived before the request was sent`);
}
