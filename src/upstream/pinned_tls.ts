/**
 * The SPKI-pinned TLS connector: a verified confidential upstream may only be
 * reached over a connection whose server key (SHA-256 of its SubjectPublicKeyInfo)
 * is the attested one. The global `fetch` and `Deno.connectTls` expose no peer
 * certificate, so the socket is opened with `node:tls` (certificate and host
 * name verified as usual) and the key is checked on `secureConnect`, before
 * the socket is handed to the HTTP/1.1 client: on a mismatch the client never
 * gets a socket, so not one request byte is written.
 */
import type tls from "node:tls";
import { isIP } from "node:net";
import { GatewayError } from "../http/mod.ts";
import { normalizeSpkiPin, spkiSha256FromCertDer } from "./spki.ts";
import { nodeSocketConn } from "./node_socket.ts";
import type { H1Connect, H1Socket, H1Target } from "./h1_client.ts";

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

/** Whether `e` (or an error it wraps) is a pin mismatch. */
export function isPinMismatch(e: unknown): boolean {
  for (let x = e, i = 0; x instanceof Error && i < 8; x = x.cause, i++) {
    if (x.name === "PinMismatchError") return true;
  }
  return false;
}

export interface PinnedTlsOptions {
  /** SHA-256 (hex) of the upstream's SubjectPublicKeyInfo DER. */
  spkiSha256: string;
  /** PEM trust anchors; default: the runtime's root store. Verification is never turned off. */
  ca?: string | string[];
  /** Name to send as SNI and to verify the certificate against; default: the URL host (DNS names). */
  servername?: string;
  /** Limit for TCP connect + TLS handshake; default 10 000 ms. */
  connectTimeoutMs?: number;
  /** Called with the observed digest when a pin check fails (re-verify, alert). */
  onMismatch?: (observed: string) => void;
  /** Counts handshakes (tests, bench). */
  onHandshake?: () => void;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** `tls.connect` (main.ts and tests pass node's). */
export type TlsConnect = (o: tls.ConnectionOptions) => tls.TLSSocket;

export function pinnedTlsConnector(tlsConnect: TlsConnect, opts: PinnedTlsOptions): H1Connect {
  const pin = normalizeSpkiPin(opts.spkiSha256);
  const timeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new TypeError("connectTimeoutMs must be a positive number");
  }
  return (t: H1Target, signal?: AbortSignal): Promise<H1Socket> => {
    if (!t.tls) {
      return Promise.reject(new GatewayError("upstream_error", "a pinned upstream needs https"));
    }
    return new Promise((resolve, reject) => {
      const socket = tlsConnect({
        host: t.hostname,
        port: t.port,
        servername: opts.servername ?? (isIP(t.hostname) === 0 ? t.hostname : undefined),
        ca: opts.ca,
        rejectUnauthorized: true,
      });
      let settled = false;
      const onAbort = () => finish(new GatewayError("upstream_error", "upstream connect aborted"));
      const finish = (err: Error | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        socket.off("error", onError);
        if (err) {
          socket.on("error", () => {}); // late errors of a discarded socket are of no interest
          socket.destroy();
          reject(err);
          return;
        }
        socket.setNoDelay(true);
        resolve(nodeSocketConn(socket));
      };
      const onError = (e: Error) => finish(connectError(e));
      const timer = setTimeout(
        () => finish(new GatewayError("upstream_timeout", "upstream TLS connect timed out")),
        timeoutMs,
      );
      socket.once("error", onError);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
      socket.once("secureConnect", () => {
        opts.onHandshake?.();
        // Defence in depth: the handshake must have verified the chain as well.
        if (!socket.authorized) {
          finish(
            new GatewayError(
              "upstream_verification_failed",
              "upstream TLS certificate not trusted",
            ),
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
    });
  };
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
