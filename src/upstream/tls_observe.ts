/**
 * Observes an upstream's TLS key without talking to it: a `node:tls`
 * handshake (CA verification on, custom trust anchors when given), then the
 * peer certificate's DER and SPKI SHA-256, then the socket is destroyed
 * before a single application byte is written. Verifiers use it to learn
 * which key to pin and to check attestation bindings against it.
 */
import { isIP } from "node:net";
import { spkiSha256FromCertDer } from "./spki.ts";
import type { TlsConnect } from "./pinned_tls.ts";

/** TLS observation of an origin: the server's SPKI digest and certificate, CA verification on. */
export interface TlsObservation {
  spkiSha256: string;
  certDer: Uint8Array;
}

/** Default bound on TCP connect + TLS handshake. */
const DEFAULT_OBSERVE_TIMEOUT_MS = 10_000;

/** Options of {@link observeTls}. */
export interface ObserveTlsOptions {
  /** Bound on connect + handshake; default {@link DEFAULT_OBSERVE_TIMEOUT_MS}. */
  timeoutMs?: number;
}

function codeOf(e: unknown): string {
  if (typeof e === "object" && e !== null && "code" in e && typeof e.code === "string") {
    return e.code;
  }
  return e instanceof Error ? e.message : "unknown";
}

/** Host and port of an `https:` origin (or any https URL: only its origin is used). */
function target(origin: string): { host: string; port: number } {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    throw new TypeError("origin is not a URL");
  }
  if (url.protocol !== "https:") throw new TypeError("origin must be https");
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  return { host, port: url.port === "" ? 443 : Number(url.port) };
}

/**
 * Handshakes with `origin` and reports the server's key. Rejects when the
 * chain or host name does not verify, the handshake fails or times out.
 */
export function observeTls(
  /** node:tls `connect`, passed in by main.ts (the only module that opens sockets). */
  tlsConnect: TlsConnect,
  origin: string,
  ca?: string,
  opts: ObserveTlsOptions = {},
): Promise<TlsObservation> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_OBSERVE_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    return Promise.reject(new TypeError("timeoutMs must be a positive number"));
  }
  let t: { host: string; port: number };
  try {
    t = target(origin);
  } catch (e) {
    return Promise.reject(e);
  }
  return new Promise<TlsObservation>((resolve, reject) => {
    const socket = tlsConnect({
      host: t.host,
      port: t.port,
      // SNI only carries DNS names; the certificate is still checked against the IP.
      servername: isIP(t.host) === 0 ? t.host : undefined,
      ca,
      rejectUnauthorized: true,
    });
    let settled = false;
    const finish = (err: Error | null, value?: TlsObservation) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.on("error", () => {}); // late errors of a socket we discard are of no interest
      socket.destroy();
      if (err) reject(err);
      else resolve(value!);
    };
    const timer = setTimeout(
      () => finish(new Error(`TLS handshake with ${origin} timed out after ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.once("error", (e) => {
      finish(new Error(`TLS handshake with ${origin} failed (${codeOf(e)})`));
    });
    socket.once("secureConnect", () => {
      if (!socket.authorized) {
        finish(new Error(`TLS certificate of ${origin} not trusted`));
        return;
      }
      const raw = socket.getPeerCertificate(false)?.raw;
      if (!raw || raw.length === 0) {
        finish(new Error(`${origin} presented no TLS certificate`));
        return;
      }
      const certDer = new Uint8Array(raw); // a copy: the socket's buffer goes away with it
      try {
        finish(null, { spkiSha256: spkiSha256FromCertDer(certDer), certDer });
      } catch {
        finish(new Error(`TLS certificate of ${origin} could not be parsed`));
      }
    });
  });
}
