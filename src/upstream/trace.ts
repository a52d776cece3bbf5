/**
 * The client span of one upstream attempt, with W3C trace propagation
 * (`traceparent`) into the attempt's headers: the gateway's HTTP/1.1 client
 * is its own code, so Deno's automatic fetch instrumentation does not see it.
 * Through `@opentelemetry/api`, which Deno wires to its exporter under
 * `OTEL_DENO=true`; otherwise (no recording tracer, no propagator) every
 * attempt gets one shared no-op. Attributes are metadata only: never a header,
 * a body or a credential.
 */
import {
  type Context,
  context,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";

const tracer = trace.getTracer("confidential-inference-gateway");

export interface AttemptSpan {
  /** Adds `traceparent` (and `tracestate`) for this span to the attempt's headers. */
  inject(headers: Record<string, string>): void;
  /** Runs `f` with this span active (a `fetch` transport's own span becomes its child). */
  run<T>(f: () => T): T;
  /** Ends the span with the answer's status, or the failure's kind. */
  end(status: number | undefined, failure?: string): void;
}

/** Without a tracer that records or a propagator, a span does nothing: the same no-op for every attempt. */
const NO_SPAN: AttemptSpan = {
  inject: () => {},
  run: (f) => f(),
  end: () => {},
};

/**
 * Whether spans do anything in this process: decided at the first attempt,
 * since Deno wires its exporter (`OTEL_DENO=true`) before any module runs.
 * Saves a URL parse, a span and a context per attempt when tracing is off.
 */
let tracing: boolean | undefined;
function tracingOn(): boolean {
  if (tracing === undefined) {
    const probe = tracer.startSpan("probe");
    tracing = probe.isRecording() || propagation.fields().length > 0;
    probe.end();
  }
  return tracing;
}

export function attemptSpan(url: string, attributes: Record<string, string>): AttemptSpan {
  if (!tracingOn()) return NO_SPAN;
  const u = new URL(url);
  const span: Span = tracer.startSpan(`POST ${u.pathname}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      "http.request.method": "POST",
      "server.address": u.hostname,
      "server.port": Number(u.port || (u.protocol === "https:" ? 443 : 80)),
      "url.path": u.pathname,
      ...attributes,
    },
  });
  const ctx: Context = trace.setSpan(context.active(), span);
  return {
    inject: (headers) => propagation.inject(ctx, headers),
    run: (f) => context.with(ctx, f),
    end(status, failure) {
      if (status !== undefined) span.setAttribute("http.response.status_code", status);
      if (failure !== undefined || (status !== undefined && status >= 400)) {
        span.setAttribute("error.type", failure ?? String(status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    },
  };
}
