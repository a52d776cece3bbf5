/**
 * The verifying client for Node ≥ 20 and Deno: the library with the pinned
 * `node:tls` transport as its default, so every connection's TLS key is
 * checked against the attested keyset before a request byte is written.
 *
 *   import OpenAI from "openai";
 *   import { verifyingFetch } from "@aci-gateway/verifying-client";
 *   const client = new OpenAI({ baseURL, apiKey, fetch: verifyingFetch({ baseURL, policy }) });
 */
import {
  createVerifyingFetch,
  type VerifyingFetch,
  type VerifyingFetchOptions,
} from "./verifying_fetch.ts";
import { nodeTransport } from "./node_transport.ts";

export * from "./mod.ts";
export { nodeTransport, type NodeTransportOptions } from "./node_transport.ts";

/** {@link createVerifyingFetch} with the pinned transport unless another is given. */
export function verifyingFetch(o: VerifyingFetchOptions): VerifyingFetch {
  return createVerifyingFetch({ ...o, transport: o.transport ?? nodeTransport() });
}
