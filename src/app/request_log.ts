/**
 * The one log line per request: ids, route, key id, model, provider, status,
 * how each attempt ended, latency and token counts — never content.
 */
import type { LogLine, RequestInfo } from "../handlers/mod.ts";

export function requestLogLine(
  info: RequestInfo,
  status: number,
  outcome: string | undefined,
  now: number,
): LogLine {
  return {
    level: "info",
    request_id: info.requestId,
    trace_id: info.traceId,
    route: info.route ?? null,
    key_id: info.keyId ?? null,
    receipt_id: info.receiptId ?? null,
    model: info.model,
    provider: info.provider,
    status,
    error_code: info.errorCode ?? null,
    outcome: outcome ?? (status < 400 ? "ok" : "refused"),
    // Providers tried, in order, and how each attempt ended (never content).
    attempts: info.attempts ?? [],
    latency_ms: now - info.started,
    prompt_tokens: info.usage?.prompt_tokens ?? null,
    completion_tokens: info.usage?.completion_tokens ?? null,
    metadata: info.metadata ?? null,
  };
}
