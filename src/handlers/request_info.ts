/**
 * The per-request facts the pipeline threads through a request (for the log
 * line and headers). Its own module so that the context (`handlers/context.ts`)
 * and the stream writer can name it without importing the pipeline.
 */
import type { GatewayError } from "../http/mod.ts";
import type { TokenUsage } from "./plan.ts";

/** Per-request facts the pipeline threads through (for the log line and headers). */
export interface RequestInfo {
  requestId: string;
  traceId: string;
  started: number;
  model: string | null;
  provider: string | null;
  usage: TokenUsage | undefined;
  metadata: unknown;
  /** The matched route pattern (never the raw path, which may carry ids). */
  route?: string;
  /** Streams log when they end, not when the headers leave. */
  deferLog?: boolean;
  /** Milliseconds spent in each phase (the `Server-Timing` header). */
  phases: Record<string, number>;
  /** For the log line: the authenticated key's public id, the receipt id, the error code. */
  keyId?: string | null;
  receiptId?: string | null;
  errorCode?: string | null;
  /** Every upstream attempt and how it ended (`served`, or why it failed). */
  attempts?: { provider: string; outcome: string }[];
  /** A bad `x-service-trace-id` / `x-service-metadata`: refused after authentication, with a receipt. */
  headerError?: GatewayError;
  /** Credits the request was settled at (metrics). */
  costNano?: bigint;
  /** The error kind of a refused or failed inference request (metrics). */
  refusal?: string;
  /** The request's OpenTelemetry context, captured on arrival (a stream logs after it returned). */
  traceContext?: unknown;
}
