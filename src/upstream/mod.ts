/** Reaching upstreams' front door: the HTTP/1.1 client, TLS pinning and one attempt at a time. */

export type { BodyReadLimits } from "./body_read.ts";
export { type ChunkReader, drainRest, upstreamBodyReader } from "./chunk_reader.ts";
export {
  type AttemptAnswer,
  type AttemptFailure,
  joinUrl,
  readBounded,
  sendAttempt,
  type UpstreamFetch,
} from "./forward.ts";
export type { TlsConnect } from "./pinned_tls.ts";
export { PROXY_VARIABLES } from "./socket_connector.ts";
export { spkiSha256FromPem } from "./spki.ts";
export { observeTls, type TlsObservation } from "./tls_observe.ts";
export {
  createUpstreamTransport,
  pinnedOneShotFetch,
  type TransportDeps,
  type UpstreamTransport,
} from "./transport.ts";
