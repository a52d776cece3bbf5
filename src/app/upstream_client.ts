/**
 * The upstream client `serve` builds: over the runtime's sockets, or the
 * runtime's fetch when a proxy variable is set (main.ts says whether one is).
 */
import type { GatewayConfig } from "../config/mod.ts";
import {
  createUpstreamTransport,
  type TransportDeps,
  type UpstreamTransport,
} from "../upstream/mod.ts";

/** The upstream client: over the runtime's sockets, or fetch when a proxy variable is set. */
export function upstreamTransport(
  config: GatewayConfig,
  proxied: boolean,
  deps: Omit<TransportDeps, "choice">,
  print: (line: string) => void,
): UpstreamTransport {
  if (proxied && config.upstream.client === "http1") {
    print("a proxy variable is set: upstreams are reached with fetch, which honours it");
  }
  return createUpstreamTransport({ ...deps, choice: proxied ? "fetch" : config.upstream.client });
}
