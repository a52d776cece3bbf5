/**
 * Plain (unpinned) fetches to upstreams that use a private CA (`tls_ca_pem`),
 * e.g. a confidential upstream before it is verified. One HTTP client per CA.
 */
import type { ProviderConfig } from "../config/schema.ts";
import type { UpstreamFetch } from "./forward.ts";

export function caTrustingFetch(
  base: typeof fetch,
): { fetchFor: (p: ProviderConfig) => UpstreamFetch; close(): void } {
  const clients = new Map<string, Deno.HttpClient>();
  return {
    fetchFor(p) {
      const pem = p.confidential?.tls_ca_pem;
      if (!pem) return (url, init) => base(url, init);
      let client = clients.get(pem);
      if (!client) {
        client = Deno.createHttpClient({ caCerts: [pem] });
        clients.set(pem, client);
      }
      const c = client;
      return (url, init) => base(url, { ...init, client: c } as RequestInit);
    },
    close() {
      for (const c of clients.values()) c.close();
    },
  };
}
