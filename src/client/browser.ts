/**
 * The verifying client for browsers (the entry of `deno task client-browser`,
 * an ESM bundle with no node: module). A page's `fetch` hides the peer
 * certificate, so the TLS key cannot be pinned here: `tlsPinning` is false,
 * every verdict's `tls.pin` check says so, and the prompt is protected by
 * E2EE instead, which the client then requires of an https gateway (a
 * gateway without it is refused with `e2ee_unavailable`). Everything else is
 * checked as in Node: the report (TDX and SEV-SNP quotes with the code
 * `task verify` uses; TDX collateral supplied with `quoteTrust.tdxCollateralJson`
 * or fetched from a CORS-enabled `pcsBaseUrl`), each receipt, log inclusion.
 *
 *   import OpenAI from "openai";
 *   import { verifyingFetch } from "./aci-verifying-client.browser.js";
 *   const client = new OpenAI({ baseURL, apiKey, dangerouslyAllowBrowser: true,
 *     fetch: verifyingFetch({ baseURL, policy }) });
 */
import {
  createVerifyingFetch,
  type VerifyingFetch,
  type VerifyingFetchOptions,
} from "./verifying_fetch.ts";
import { fetchTransport } from "./transport.ts";

export * from "./mod.ts";

/** False: a browser cannot see, so cannot pin, the gateway's TLS key. */
export const TLS_PINNING_AVAILABLE = false;

/** {@link createVerifyingFetch} over the page's own fetch (no pinning, E2EE required on https). */
export function verifyingFetch(o: Omit<VerifyingFetchOptions, "transport">): VerifyingFetch {
  return createVerifyingFetch({ ...o, transport: fetchTransport() });
}
