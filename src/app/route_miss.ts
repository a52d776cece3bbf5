/** The gateway's answer to a request the route table does not serve: 405 with Allow, or 404. */
import { GatewayError, type Miss } from "../http/mod.ts";

export function missError(method: string, miss: Miss): GatewayError {
  if (miss.allowed.length === 0) return new GatewayError("not_found", "no such endpoint");
  return new GatewayError("method_not_allowed", `method ${method} is not allowed on this path`, {
    headers: { Allow: miss.allowed.join(", ") },
  });
}
