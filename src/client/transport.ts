/**
 * How the verifying client reaches the gateway. A transport performs one
 * HTTP exchange; when it can see the TLS peer (Node, Deno: `node_transport.ts`)
 * it asks `onTlsKey` about each new connection's key before a byte of any
 * request is written on it. In a browser the page's `fetch` hides the peer
 * certificate, so pinning is impossible there: `fetchTransport` says so
 * (`pinning: false`) and the client then insists on E2EE.
 */

/** One request, as the client sends it. */
/**
 * How long a receipt, report or proof may take to arrive whole: a gateway (or anyone
 * between) that never finishes one is a failed check, not a call that never returns.
 */
export const ARTIFACT_FETCH_MS = 30_000;

export interface TransportRequest {
  method: string;
  headers: Headers;
  body?: Uint8Array<ArrayBuffer>;
  signal?: AbortSignal;
}

/**
 * Called with the SHA-256 (hex) of the SubjectPublicKeyInfo of each new TLS
 * connection before it carries a request; rejecting refuses the connection.
 * `null` (report fetches): any key, nothing secret is sent.
 */
export type TlsKeyCheck = ((spkiSha256: string) => Promise<void>) | null;

export interface Transport {
  /** Whether this transport can check the TLS key of the connections it opens. */
  readonly pinning: boolean;
  send(url: URL, req: TransportRequest, onTlsKey: TlsKeyCheck): Promise<Response>;
  /** Closes idle connections. */
  close(): void;
}

/** A transport over a `fetch` (a browser's, or any runtime's): no TLS pinning possible. */
export function fetchTransport(f: typeof fetch = (i, o) => fetch(i, o)): Transport {
  return {
    pinning: false,
    // A redirect is handed back, never followed: following would carry the request's body
    // (a prompt) to wherever a 3xx points (the Node transport follows none either).
    send: (url, req) =>
      f(url, {
        method: req.method,
        headers: req.headers,
        body: req.body,
        signal: req.signal,
        redirect: "manual",
      }),
    close: () => {},
  };
}
