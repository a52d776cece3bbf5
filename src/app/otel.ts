/**
 * What the gateway exports through OpenTelemetry when `OTEL_DENO=true`,
 * beside Deno's own server spans and the upstream client spans
 * (`upstream/trace.ts`): its per-request counters and latency as OTel metrics
 * (the same facts as the Prometheus ones), and its per-request log line as an
 * OTel log record inside the request's trace (main.ts passes the writer:
 * `console.log`, which Deno exports with the active span's trace and span
 * ids). Only the per-request line is exported: it holds ids, counts and names,
 * never a body, prompt, key or credential; secrets the gateway prints (the dev
 * key, a created key) are written past the console, so they are never exported.
 */
import { type Context, context, metrics, trace } from "@opentelemetry/api";
import type { LogLine } from "../handlers/mod.ts";
import type { RequestObservation } from "../operator/mod.ts";

export interface OtelExport {
  /** The trace context of the request being handled now (its server span), if any. */
  capture(): Context;
  /** One finished request: metrics recorded, its log line written inside its trace. */
  request(
    o: RequestObservation,
    latencyMs: number,
    line: LogLine,
    within: Context | undefined,
  ): void;
}

export function createOtelExport(writeLine: (line: LogLine) => void): OtelExport {
  const meter = metrics.getMeter("confidential-inference-gateway");
  const requests = meter.createCounter("gateway.requests", {
    description: "Requests answered, by route pattern, status, model and provider.",
  });
  const tokens = meter.createCounter("gateway.tokens", {
    description: "Tokens settled, by model, provider and kind (prompt or completion).",
  });
  const credits = meter.createCounter("gateway.credits_spent", {
    description: "Credits settled, by model.",
  });
  const duration = meter.createHistogram("gateway.request.duration", {
    description: "Time from the request's arrival to its log line.",
    unit: "s",
  });
  return {
    capture: () => context.active(),
    request(o, latencyMs, line, within) {
      const model = o.model ?? "";
      const provider = o.provider ?? "";
      requests.add(1, { "http.route": o.route, status: o.status, model, provider });
      duration.record(latencyMs / 1000, { "http.route": o.route });
      if (o.usage) {
        tokens.add(o.usage.prompt_tokens, { model, provider, kind: "prompt" });
        tokens.add(o.usage.completion_tokens, { model, provider, kind: "completion" });
      }
      if (o.costNano !== undefined && o.costNano > 0n) {
        credits.add(Number(o.costNano) / 1e9, { model });
      }
      const span = within ? trace.getSpanContext(within) : undefined;
      const withIds = span
        ? { ...line, otel_trace_id: span.traceId, otel_span_id: span.spanId }
        : line;
      // A stream's line is written after its handler returned: back inside its trace.
      if (within) context.with(within, () => writeLine(withIds));
      else writeLine(withIds);
    },
  };
}
