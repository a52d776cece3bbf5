/**
 * The gateway's one upstream transport: one HTTP/1.1 client (h1_client.ts)
 * over three connectors, each with its own keep-alive pools:
 * - plain TCP, or TLS against the runtime's roots (`socketConnector`);
 * - TLS against a configured CA (`tls_ca_pem`: a confidential upstream before
 *   it is verified), one connector per CA;
 * - SPKI-pinned TLS (`pinned_tls.ts`) for a verified upstream, one connector
 *   per (provider, pinned key), retired with `dropPinned` when the provider's
 *   session is invalidated or its key changes.
 * `upstream.client: "fetch"` sends only plain upstream requests through the
 * runtime's `fetch` (it honours proxy variables); pinned and CA-trusting
 * requests always use this client, since `fetch` can neither pin nor be
 * pooled per key.
 *
 * At most once: the client never re-sends a request. A connection is pooled
 * only after an exchange that ended cleanly (complete body, no excess bytes,
 * no abort) and reused only if no byte arrived while it was idle; a request
 * whose bytes may have reached the upstream is never written again by the
 * transport (failover to another candidate is forward.ts's decision).
 */
import { createHash } from "node:crypto";
import { createH1Client, type H1Client, type H1Connector } from "./h1_client.ts";
import { pinnedTlsConnector, type TlsConnect } from "./pinned_tls.ts";
import { type SocketApi, socketConnector } from "./socket_connector.ts";
import type { UpstreamFetch } from "./forward.ts";

export type UpstreamClientChoice = "http1" | "fetch";

export interface PinnedUpstream {
  provider: string;
  spkiSha256: string;
  ca?: string;
  onMismatch?: (observed: string) => void;
}

export interface UpstreamTransport {
  /** Plain upstreams (and TLS ones the runtime's roots vouch for). */
  fetch: UpstreamFetch;
  /** A verified upstream: only over a connection presenting its pinned key. */
  pinned(p: PinnedUpstream): UpstreamFetch;
  /** Closes (now or when in use ends) every pinned connection to this provider. */
  dropPinned(provider: string): void;
  /** An upstream whose certificate chains to this CA (PEM). */
  withCa(pem: string): UpstreamFetch;
  close(): void;
}

export interface TransportDeps {
  choice: UpstreamClientChoice;
  /** The runtime's TCP connect and TLS upgrade (main.ts: Deno.connect, Deno.startTls). */
  net: SocketApi;
  /** node:tls `connect`, for pinned connections. */
  tlsConnect: TlsConnect;
  /** The runtime's fetch, for `choice: "fetch"`. */
  fetch: UpstreamFetch;
  now: () => number;
  /** Counts TLS handshakes of pinned connections (tests, bench). */
  onPinnedHandshake?: () => void;
}

export function createUpstreamTransport(deps: TransportDeps): UpstreamTransport {
  const client = createH1Client({ connect: socketConnector(deps.net), now: deps.now });
  const pinned = new Map<string, H1Connector>();
  const cas = new Map<string, H1Connector>();
  const through = (connector?: H1Connector): UpstreamFetch => (url, init) =>
    h1Fetch(client, url, init, connector);
  return {
    fetch: deps.choice === "fetch" ? deps.fetch : through(),
    pinned(p) {
      const id = `pin:${p.provider}:${p.spkiSha256}`;
      let connector = pinned.get(id);
      if (!connector) {
        connector = {
          id,
          connect: pinnedTlsConnector(deps.tlsConnect, {
            spkiSha256: p.spkiSha256,
            ca: p.ca,
            onMismatch: p.onMismatch,
            onHandshake: deps.onPinnedHandshake,
          }),
        };
        pinned.set(id, connector);
      }
      return through(connector);
    },
    dropPinned(provider) {
      const prefix = `pin:${provider}:`;
      for (const id of [...pinned.keys()]) {
        if (!id.startsWith(prefix)) continue;
        pinned.delete(id);
        client.drop(id);
      }
    },
    withCa(pem) {
      const id = `ca:${createHash("sha256").update(pem).digest("hex")}`;
      let connector = cas.get(id);
      if (!connector) {
        connector = { id, connect: socketConnector(deps.net, { caCerts: [pem] }) };
        cas.set(id, connector);
      }
      return through(connector);
    },
    close: () => client.close(),
  };
}

function h1Fetch(
  client: H1Client,
  url: string,
  init: Parameters<UpstreamFetch>[1],
  connector: H1Connector | undefined,
): Promise<Response> {
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
    onWritten: init.onWritten,
    connector,
  });
}

/**
 * A pinned fetch for one verification: same client and connector, no pool (verification
 * is rare, and a socket left behind would outlive the check).
 */
export function pinnedOneShotFetch(
  tlsConnect: TlsConnect,
  opts: { spkiSha256: string; ca?: string; connectTimeoutMs?: number },
): (url: string, init?: RequestInit) => Promise<Response> {
  const client = createH1Client({
    connect: pinnedTlsConnector(tlsConnect, opts),
    now: () => 0, // nothing is pooled, so no idle age is ever read
    maxIdlePerOrigin: 0,
  });
  return (url, init = {}) => {
    const body = init.body;
    if (body != null && !(body instanceof Uint8Array) && typeof body !== "string") {
      return Promise.reject(new TypeError("pinned fetch bodies must be bytes or text"));
    }
    if (!url.startsWith("https:")) {
      return Promise.reject(new TypeError("pinned fetch only accepts https: URLs"));
    }
    return client.fetch(url, {
      method: init.method,
      headers: init.headers,
      body,
      signal: init.signal ?? undefined,
    });
  };
}
