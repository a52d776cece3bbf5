/**
 * The one log line per request: ids, route, key id, model, provider, status,
 * how each attempt ended, latency and token counts — never content. The
 * logger made here counts the request in the metrics and writes its line
 * (or hands both to OpenTelemetry's exporter); the app builds it once.
 */
import type { LogLine } from "./context.ts";
import type { RequestInfo } from "./request_info.ts";
import type { GatewayMetrics } from "../operator/mod.ts";

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

/** What the metrics see of a finished request. */
export type ObservedRequest = Parameters<GatewayMetrics["request"]>[0];

export interface RequestLoggerDeps {
  metrics: Pick<GatewayMetrics, "request">;
  now: () => number;
  /** Writes the line; with OpenTelemetry on, its exporter takes the line and the request. */
  emit: (line: LogLine, observed: ObservedRequest, elapsedMs: number, info: RequestInfo) => void;
}

/** `GatewayContext.logRequest`: one metrics count and one line per request. */
export function requestLogger(
  d: RequestLoggerDeps,
): (info: RequestInfo, status: number, outcome?: string) => void {
  return (info, status, outcome) => {
    const observed: ObservedRequest = {
      route: info.route ?? "unmatched",
      status,
      model: info.model,
      provider: info.provider,
      phases: info.phases,
      costNano: info.costNano,
      usage: info.usage,
      refusal: info.refusal,
    };
    d.metrics.request(observed);
    const t = d.now();
    d.emit(requestLogLine(info, status, outcome, t), observed, t - info.started, info);
  };
}
