/** The one object a request's layers share (src/app/layers.ts): made once per request, nothing else is. */
import type { ErrorFormat } from "../http/mod.ts";
import type { RequestInfo } from "../handlers/mod.ts";

export interface Exchange {
  req: Request;
  url: URL;
  /** Monotonic start (the gateway's own time, `Server-Timing: gw`). */
  started: number;
  /** The envelope errors are rendered in (the path's row: OpenAI or Anthropic). */
  format: ErrorFormat;
  /** The route pattern matched, `preflight`, or `unmatched` (logs never see the raw path). */
  pattern: string;
  info: RequestInfo;
}
