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

/**
 * The collateral fetch, saying what to do when the page may not reach a PCS (a cross-origin
 * refusal surfaces only as a bare TypeError): the report is then refused, `attestation_failed`.
 */
function collateralFetch(f: typeof fetch): typeof fetch {
  return async (input, init) => {
    try {
      return await f(input, init);
    } catch (e) {
      const where = String(input instanceof Request ? input.url : input).split("?")[0];
      throw new Error(
        `${where} is unreachable from this page (${(e as Error).message}): in a browser, supply ` +
          "quoteTrust.tdxCollateralJson or a quoteTrust.pcsBaseUrl that allows this origin",
        { cause: e },
      );
    }
  };
}

/** {@link createVerifyingFetch} over the page's own fetch (no pinning, E2EE required on https). */
export function verifyingFetch(o: Omit<VerifyingFetchOptions, "transport">): VerifyingFetch {
  const quoteTrust = {
    ...o.quoteTrust,
    fetch: collateralFetch(o.quoteTrust?.fetch ?? ((i, x) => fetch(i, x))),
  };
  return createVerifyingFetch({ ...o, quoteTrust, transport: fetchTransport() });
}
