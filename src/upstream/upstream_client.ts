/**
 * The client for ordinary (unpinned) upstream requests, as configured by
 * `upstream.client`: the gateway's own HTTP/1.1 client (default; less memory
 * per open stream and less CPU per request) or Deno's `fetch`. Verified
 * upstreams always go through the TLS-pinned client instead (pinned_fetch.ts).
 */
import { createH1Client, type H1Connect, type H1Target } from "./h1_client.ts";
import type { UpstreamFetch } from "./forward.ts";

export type UpstreamClientChoice = "http1" | "fetch";

export interface UpstreamClient {
  fetch: UpstreamFetch;
  close(): void;
}

export function createUpstreamClient(
  choice: UpstreamClientChoice,
  deps: { connect: H1Connect; fetch: UpstreamFetch; now: () => number },
): UpstreamClient {
  if (choice === "fetch") return { fetch: deps.fetch, close() {} };
  const client = createH1Client({ connect: deps.connect, now: deps.now });
  return {
    fetch: (url, init) => {
      const body = init.body;
      if (body != null && !(body instanceof Uint8Array) && typeof body !== "string") {
        return Promise.reject(new TypeError("upstream request body must be bytes or text"));
      }
      return client.fetch(url, {
        method: init.method,
        headers: init.headers,
        body,
        signal: init.signal,
        partition: init.partition,
      });
    },
    close: () => client.close(),
  };
}

/** Environment variables that route `fetch` through a proxy (the HTTP/1.1 client ignores them). */
export const PROXY_VARIABLES = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "all_proxy",
];

/** The runtime's socket calls (main.ts passes `Deno.connect` and `Deno.startTls`). */
export interface SocketApi {
  connect(opts: { hostname: string; port: number }): Promise<Deno.TcpConn>;
  startTls(
    conn: Deno.TcpConn,
    opts: { hostname: string; caCerts?: string[] },
  ): Promise<Deno.TlsConn>;
}

/**
 * Sockets for the HTTP/1.1 client, with Nagle off: a large prompt is written
 * in two parts, and the second must not wait for the upstream's delayed ACK.
 * TLS is started over that TCP socket; the certificate and host name are
 * checked against the runtime's roots (as `fetch` does), or `caCerts`.
 */
export function socketConnector(net: SocketApi, tls: { caCerts?: string[] } = {}): H1Connect {
  return async ({ hostname, port, tls: secure }: H1Target): Promise<Deno.Conn> => {
    const tcp = await net.connect({ hostname, port });
    tcp.setNoDelay(true);
    if (!secure) return tcp;
    let conn: Deno.TlsConn | undefined;
    try {
      conn = await net.startTls(tcp, { hostname, ...tls });
      await conn.handshake();
      return conn;
    } catch (e) {
      try {
        (conn ?? tcp).close();
      } catch {
        // already closed by the failed handshake
      }
      throw e;
    }
  };
}
