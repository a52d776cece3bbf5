/**
 * The plain connector of the upstream transport (transport.ts): TCP with
 * Nagle off, and TLS over it checked against the runtime's roots or a
 * configured CA. Pinned TLS is pinned_tls.ts.
 */
import type { H1Connect, H1Socket, H1Target } from "./h1_client.ts";

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
  return async ({ hostname, port, tls: secure }: H1Target): Promise<H1Socket> => {
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
