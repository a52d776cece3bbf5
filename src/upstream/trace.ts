/**
 * The client span of one upstream attempt, with W3C trace propagation
 * (`traceparent`) into the attempt's headers: the gateway's HTTP/1.1 client
 * is its own code, so Deno's automatic fetch instrumentation does not see it.
 * Through `@opentelemetry/api`, which Deno wires to its exporter under
 * `OTEL_DENO=true`; otherwise the API's no-op tracer and propagator make this
 * a few allocations. Attributes are metadata only: never a header, a body or
 * a credential.
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

export function attemptSpan(url: string, attributes: Record<string, string>): AttemptSpan {
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
