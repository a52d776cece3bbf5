/**
 * The pinned transport for Node and Deno: HTTP/1.1 (`node:http`) over
 * connections opened with `node:tls`, whose peer key is checked on
 * `secureConnect`, before the socket is handed to the HTTP client, so a
 * refused key never sees a request byte. The chain is not judged: the pin is
 * the attested key itself (gateways in a TEE commonly serve self-signed
 * certificates). Connections are kept alive, and each new one is checked.
 */
import http from "node:http";
import tls from "node:tls";
import net from "node:net";
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type { TlsKeyCheck, Transport, TransportRequest } from "./transport.ts";

/** Options of {@link nodeTransport}. */
export interface NodeTransportOptions {
  /** TCP connect + TLS handshake limit, ms (default 10 000). */
  connectTimeoutMs?: number;
  /** Called on every new TLS connection with its key digest (tests, audit). */
  onHandshake?: (spkiSha256: string) => void;
}

/** SHA-256 hex of a TLS socket's peer SubjectPublicKeyInfo, or null without a certificate. */
function peerSpkiSha256(socket: tls.TLSSocket): string | null {
  const cert = socket.getPeerX509Certificate();
  if (!cert) return null;
  const der = cert.publicKey.export({ type: "spki", format: "der" });
  return createHash("sha256").update(der).digest("hex");
}

type Callback = (err: Error | null, socket?: net.Socket) => void;

function pinnedAgent(check: TlsKeyCheck, o: NodeTransportOptions): http.Agent {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const timeoutMs = o.connectTimeoutMs ?? 10_000;
  // Asynchronous createConnection: the socket reaches the HTTP client only after the check.
  (agent as unknown as { createConnection: unknown }).createConnection = (
    opts: { host: string; port: number; servername?: string },
    cb: Callback,
  ) => {
    const socket = tls.connect({
      host: opts.host,
      port: opts.port,
      servername: opts.servername ?? (net.isIP(opts.host) === 0 ? opts.host : undefined),
      rejectUnauthorized: false,
      ALPNProtocols: ["http/1.1"],
    });
    // Requests are small writes answered at once: no Nagle delay.
    socket.setNoDelay(true);
    let done = false;
    const finish = (err: Error | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) {
        socket.destroy();
        cb(err);
      } else cb(null, socket);
    };
    const timer = setTimeout(() => finish(new Error("TLS connect timed out")), timeoutMs);
    socket.once("error", (e) => finish(e));
    socket.once("secureConnect", () => {
      const spki = peerSpkiSha256(socket);
      if (spki === null) return finish(new Error("the server presented no certificate"));
      o.onHandshake?.(spki);
      if (check === null) return finish(null);
      check(spki).then(
        () => finish(null),
        (e) => finish(e instanceof Error ? e : new Error(String(e))),
      );
    });
    return undefined;
  };
  return agent;
}

/** The pinned transport (Node ≥ 20, Deno). */
export function nodeTransport(o: NodeTransportOptions = {}): Transport {
  const agents = new Map<TlsKeyCheck, http.Agent>();
  const plain = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const agentFor = (check: TlsKeyCheck) => {
    let a = agents.get(check);
    if (!a) agents.set(check, a = pinnedAgent(check, o));
    return a;
  };
  return {
    pinning: true,
    send: (url: URL, req: TransportRequest, check: TlsKeyCheck) =>
      request(url, req, url.protocol === "https:" ? agentFor(check) : plain),
    close: () => {
      for (const a of agents.values()) a.destroy();
      plain.destroy();
    },
  };
}

/**
 * One exchange; a kept-alive connection the server closed meanwhile fails
 * before any answer, and the request is then sent once more on a new one
 * (as browsers do: the server never saw it).
 */
async function request(url: URL, req: TransportRequest, agent: http.Agent): Promise<Response> {
  try {
    return await requestOnce(url, req, agent);
  } catch (e) {
    if (!(e instanceof StaleSocketError)) throw e;
    return await requestOnce(url, req, agent);
  }
}

class StaleSocketError extends Error {}

function requestOnce(url: URL, req: TransportRequest, agent: http.Agent): Promise<Response> {
  const headers: Record<string, string> = {};
  req.headers.forEach((v, k) => (headers[k] = v));
  if (req.body !== undefined) headers["content-length"] = String(req.body.byteLength);
  return new Promise<Response>((resolve, reject) => {
    const r = http.request({
      host: url.hostname.replace(/^\[|\]$/g, ""),
      port: url.port || (url.protocol === "https:" ? 443 : 80),
      path: url.pathname + url.search,
      method: req.method,
      headers: { host: url.host, ...headers },
      agent,
      signal: req.signal,
    }, (res) => {
      const h = new Headers();
      for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
        h.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
      }
      const status = res.statusCode ?? 502;
      const empty = status === 204 || status === 304 || req.method === "HEAD";
      if (empty) res.resume();
      const body = empty ? null : Readable.toWeb(res) as unknown as ReadableStream<Uint8Array>;
      resolve(new Response(body, { status, statusText: res.statusMessage, headers: h }));
    });
    r.on("socket", (s) => s.setNoDelay(true));
    // Ended by hand as well: the runtime's node:http does not always honour `signal`, and a
    // request that never gets its answer must not hold its caller forever.
    const abort = () =>
      r.destroy(new Error("the request was aborted", { cause: req.signal?.reason }));
    if (req.signal?.aborted) abort();
    else req.signal?.addEventListener("abort", abort, { once: true });
    r.on("close", () => req.signal?.removeEventListener("abort", abort));
    r.on(
      "error",
      (e) =>
        reject(
          r.reusedSocket && !req.signal?.aborted
            ? new StaleSocketError(e.message, { cause: e })
            : e,
        ),
    );
    r.end(req.body);
  });
}
