/**
 * A fetch-shaped HTTPS client that pins the upstream's TLS key. Requests to a
 * verified confidential upstream may only travel over a connection whose
 * server SPKI SHA-256 equals the attested pin. The global `fetch` exposes no
 * peer certificate, so this is built on `node:tls` + `node:https`: an Agent
 * whose `createConnection` opens the TLS socket itself, with CA verification
 * on, and checks the pin on `secureConnect` BEFORE handing the socket to the
 * HTTP layer. On mismatch the HTTP layer never receives a socket, so not one
 * request byte can be written. The keep-alive pool only ever holds sockets
 * that passed the check.
 */
import https from "node:https";
import tls from "node:tls";
import type { ClientRequest, ClientRequestArgs, IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { isIP } from "node:net";
import { GatewayError } from "../http/errors.ts";
import { normalizeSpkiPin, spkiSha256FromCertDer } from "./spki.ts";

/** The upstream presented a TLS key other than the pinned one. No request byte was sent. */
export class PinMismatchError extends GatewayError {
  readonly expected: string;
  /** Observed SPKI SHA-256 (hex), or `"none"` when the peer presented no certificate. */
  readonly observed: string;

  constructor(expected: string, observed: string) {
    super(
      "upstream_verification_failed",
      `upstream TLS key pin mismatch: expected SPKI sha256 ${expected}, observed ${observed}`,
    );
    this.name = "PinMismatchError";
    this.expected = expected;
    this.observed = observed;
  }
}

export interface PinnedFetchOptions {
  /** SHA-256 (hex) of the upstream's SubjectPublicKeyInfo DER. */
  spkiSha256: string;
  /** PEM trust anchors; default: the runtime's root store. Verification is never turned off. */
  ca?: string | string[];
  /** Name to send as SNI and to verify the certificate against; default: the URL host (DNS names). */
  servername?: string;
  /** Limit for TCP connect + TLS handshake; default 10 000 ms. */
  connectTimeoutMs?: number;
  /** Called with the observed digest when a pin check fails (for metrics/alerts). */
  onMismatch?: (observed: string) => void;
  /** Reuse pin-checked connections; default true. */
  keepAlive?: boolean;
}

/** `fetch`-shaped: only `https:` URLs; bodies may be a string or bytes. */
export type PinnedFetch = ((url: string | URL, init?: RequestInit) => Promise<Response>) & {
  /** Destroys pooled connections. Call on shutdown (and at the end of tests). */
  close(): void;
};

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const NORMALIZED_METHODS = new Set(["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"]);
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

type ConnectCallback = (err: Error | null, socket?: tls.TLSSocket) => void;

/** Builds a pinned fetch. Throws a TypeError on a malformed pin or timeout. */
export function createPinnedFetch(opts: PinnedFetchOptions): PinnedFetch {
  const pin = normalizeSpkiPin(opts.spkiSha256);
  const connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  if (!Number.isFinite(connectTimeoutMs) || connectTimeoutMs <= 0) {
    throw new TypeError("connectTimeoutMs must be a positive number");
  }

  // Handshakes in flight, so close() can end them too (the agent only knows finished sockets).
  const connecting = new Set<() => void>();
  const connect: Connect = (options, cb) => {
    const host = options.host ?? "";
    const servername = opts.servername ?? (isIP(host) === 0 ? host : undefined);
    const socket = tls.connect({
      host,
      port: Number(options.port),
      servername,
      ca: opts.ca,
      rejectUnauthorized: true,
    });
    let settled = false;
    const finish = (err: Error | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      connecting.delete(cancel);
      socket.off("error", onError);
      if (err) {
        socket.on("error", () => {}); // late errors of a socket we discard are of no interest
        socket.destroy();
        cb(err);
      } else {
        cb(null, socket);
      }
    };
    const onError = (e: Error) => finish(connectError(e));
    const cancel = () => finish(new GatewayError("unavailable", "pinned fetch closed"));
    connecting.add(cancel);
    const timer = setTimeout(
      () => finish(new GatewayError("upstream_timeout", "upstream TLS connect timed out")),
      connectTimeoutMs,
    );
    socket.once("error", onError);
    socket.once("secureConnect", () => {
      // Defence in depth: the handshake must have verified the chain as well.
      if (!socket.authorized) {
        finish(
          new GatewayError("upstream_verification_failed", "upstream TLS certificate not trusted"),
        );
        return;
      }
      const observed = observedPin(socket);
      if (observed !== pin) {
        finish(new PinMismatchError(pin, observed)); // destroys the socket, unwritten
        try {
          opts.onMismatch?.(observed);
        } catch {
          // An observer's failure must not mask the rejection.
        }
        return;
      }
      finish(null);
    });
  };

  const agent = new PinnedAgent(connect, { keepAlive: opts.keepAlive ?? true });

  const pinnedFetch = (input: string | URL, init: RequestInit = {}): Promise<Response> =>
    request(agent, input, init);
  const close = () => {
    for (const cancel of [...connecting]) cancel();
    agent.destroy();
  };
  return Object.assign(pinnedFetch, { close });
}

type Connect = (options: ConnectOptions, cb: ConnectCallback) => void;
type ConnectOptions = { host?: string | null; port?: number | string | null };

/** An https.Agent whose sockets all come from the pin-checking `connect`. */
class PinnedAgent extends https.Agent {
  readonly #connect: Connect;

  constructor(connect: Connect, options: https.AgentOptions) {
    super(options);
    this.#connect = connect;
  }

  // Node's Agent waits for the callback when createConnection returns nothing:
  // the socket reaches the HTTP layer only after the pin check, never before.
  // (@types/node declares a sync Duplex return, hence the casts.)
  override createConnection(
    options: ClientRequestArgs,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex {
    if (!callback) throw new Error("PinnedAgent requires the asynchronous createConnection form");
    this.#connect(options, callback as unknown as ConnectCallback);
    return undefined as unknown as Duplex;
  }
}

function observedPin(socket: tls.TLSSocket): string {
  const raw = socket.getPeerCertificate(false)?.raw;
  if (!raw || raw.length === 0) return "none";
  try {
    return spkiSha256FromCertDer(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength));
  } catch {
    return "unparseable";
  }
}

function codeOf(e: unknown): string | null {
  if (typeof e === "object" && e !== null && "code" in e && typeof e.code === "string") {
    return e.code;
  }
  return null;
}

// OpenSSL-style verification codes as node:tls reports them (UNABLE_TO_VERIFY_LEAF_SIGNATURE,
// CERT_HAS_EXPIRED, ERR_TLS_CERT_ALTNAME_INVALID, SELF_SIGNED_CERT_IN_CHAIN, …).
const CERT_CODE_RE = /CERT|SIGNATURE|ISSUER|ALTNAME/;

/** Only the error code is kept in the message; the original error rides along as `cause`. */
function connectError(e: Error): GatewayError {
  const code = codeOf(e);
  const err = code !== null && CERT_CODE_RE.test(code)
    ? new GatewayError(
      "upstream_verification_failed",
      `upstream TLS certificate verification failed (${code})`,
    )
    : new GatewayError("upstream_error", `upstream TLS connection failed (${code ?? "unknown"})`);
  err.cause = e;
  return err;
}

function requestError(e: unknown): Error {
  if (e instanceof GatewayError) return e;
  const err = new GatewayError(
    "upstream_error",
    `upstream request failed (${codeOf(e) ?? "unknown"})`,
  );
  err.cause = e;
  return err;
}

function encodeBody(body: RequestInit["body"]): Uint8Array | null {
  if (body === undefined || body === null) return null;
  if (typeof body === "string") return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (ArrayBuffer.isView(body)) {
    return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  }
  throw new TypeError("pinned fetch supports string or byte bodies only");
}

function request(agent: https.Agent, input: string | URL, init: RequestInit): Promise<Response> {
  let url: URL;
  let body: Uint8Array | null;
  let method: string;
  const headers: Record<string, string> = {};
  const signal = init.signal ?? null;
  try {
    url = new URL(input);
    if (url.protocol !== "https:") throw new TypeError("pinned fetch only accepts https: URLs");
    if (url.username || url.password) throw new TypeError("URL credentials are not allowed");
    method = init.method ?? "GET";
    if (NORMALIZED_METHODS.has(method.toUpperCase())) method = method.toUpperCase();
    body = encodeBody(init.body);
    if (body && (method === "GET" || method === "HEAD")) {
      throw new TypeError(`a ${method} request cannot have a body`);
    }
    new Headers(init.headers).forEach((value, key) => (headers[key] = value));
    if (body) headers["content-length"] = String(body.byteLength);
    signal?.throwIfAborted();
  } catch (e) {
    return Promise.reject(e);
  }

  return new Promise<Response>((resolve, reject) => {
    let responded = false;
    const req = https.request({
      host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
      port: url.port === "" ? 443 : Number(url.port),
      path: url.pathname + url.search,
      method,
      headers,
      agent,
    });
    let onBodyAbort: ((reason: unknown) => void) | null = null;
    const onAbort = () => {
      const reason: unknown = signal?.reason;
      // Settle with the abort reason first, so the teardown's own errors lose the race.
      if (responded) onBodyAbort?.(reason);
      else reject(reason);
      req.destroy();
    };
    const detach = () => signal?.removeEventListener("abort", onAbort);
    signal?.addEventListener("abort", onAbort, { once: true });

    req.once("error", (e) => {
      if (responded) return; // body errors are reported through the stream
      detach();
      reject(signal?.aborted ? signal.reason : requestError(e));
    });
    req.once("response", (res: IncomingMessage) => {
      responded = true;
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 599) {
        detach();
        req.destroy();
        reject(new GatewayError("upstream_error", `upstream sent an invalid status ${status}`));
        return;
      }
      const resHeaders = new Headers();
      const raw = res.rawHeaders;
      try {
        for (let i = 0; i + 1 < raw.length; i += 2) resHeaders.append(raw[i]!, raw[i + 1]!);
      } catch {
        detach();
        req.destroy();
        reject(new GatewayError("upstream_error", "upstream sent an invalid header"));
        return;
      }
      const nullBody = method === "HEAD" || NULL_BODY_STATUSES.has(status);
      let stream: ReadableStream<Uint8Array> | null = null;
      if (nullBody) {
        detach();
        res.resume(); // drain so a keep-alive socket returns to the pool
      } else {
        const body = bodyStream(req, res, detach);
        onBodyAbort = body.abort;
        stream = body.stream;
      }
      resolve(
        new Response(stream, { status, statusText: res.statusMessage ?? "", headers: resHeaders }),
      );
    });

    req.end(body ?? undefined);
  });
}

/**
 * Streams the body with backpressure: the socket is paused while the consumer
 * has a chunk queued, so a large or slow body is never buffered whole.
 */
function bodyStream(
  req: ClientRequest,
  res: IncomingMessage,
  detach: () => void,
): { stream: ReadableStream<Uint8Array>; abort: (reason: unknown) => void } {
  let ctrl: ReadableStreamDefaultController<Uint8Array> | null = null;
  let done = false;
  const fail = (reason: unknown) => {
    if (done) return;
    done = true;
    detach();
    ctrl?.error(reason);
  };
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      ctrl = controller;
      res.on("data", (chunk: Uint8Array) => {
        if (done) return;
        controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        if ((controller.desiredSize ?? 0) <= 0) res.pause();
      });
      res.once("end", () => {
        if (done) return;
        done = true;
        detach();
        controller.close();
      });
      res.once("error", (e) => fail(requestError(e)));
      res.once("close", () => {
        fail(new GatewayError("upstream_error", "upstream response ended early"));
      });
    },
    pull() {
      res.resume();
    },
    cancel() {
      done = true;
      detach();
      req.destroy();
    },
  });
  return {
    stream,
    abort: (reason) => {
      fail(reason);
      res.destroy();
    },
  };
}
