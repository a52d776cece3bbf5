/**
 * Which fetch reaches a candidate upstream. A verified upstream is only ever
 * reached over its bound key: pinned pools per (provider, SPKI), retired
 * whenever the session they were opened under ends (invalidated, expired and
 * re-verified, or another key). A private-CA upstream gets its CA; anything
 * else the plain fetch. Chosen per attempt, so it lives with failover, not in
 * the composition root, which only builds it once.
 */
import { GatewayError } from "../http/mod.ts";
import type { Candidate } from "./select.ts";
import type { UpstreamFetch, UpstreamTransport } from "../upstream/mod.ts";

export function createFetchFor(o: {
  transport: Pick<UpstreamTransport, "pinned" | "dropPinned" | "withCa"> | undefined;
  fetch: UpstreamFetch;
  /** A pinned connection met another key: the provider's session is over. */
  invalidate: (provider: string, reason: string) => void;
}): (c: Candidate) => UpstreamFetch {
  const { transport } = o;
  const pinnedSession = new Map<string, string>();
  return (c) => {
    const v = c.verification;
    const name = c.provider.name;
    const session = v?.verified && v.spkiSha256 ? `${v.sessionId}:${v.spkiSha256}` : undefined;
    if (transport && pinnedSession.has(name) && pinnedSession.get(name) !== session) {
      pinnedSession.delete(name);
      transport.dropPinned(name);
    }
    if (v?.verified && v.spkiSha256) {
      if (!transport) throw new GatewayError("unavailable", "no pinned upstream transport");
      pinnedSession.set(name, session!);
      return transport.pinned({
        provider: name,
        spkiSha256: v.spkiSha256,
        ca: c.provider.confidential?.tls_ca_pem,
        onMismatch: () => {
          pinnedSession.delete(name);
          transport.dropPinned(name);
          o.invalidate(name, "upstream TLS key does not match its session");
        },
      });
    }
    const pem = c.provider.confidential?.tls_ca_pem;
    if (pem && transport) return transport.withCa(pem);
    return o.fetch;
  };
}
