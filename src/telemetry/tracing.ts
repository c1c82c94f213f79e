import { context, propagation, trace, type Context, type Link, type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';

/**
 * Tracing: Kafka chunk (or HTTP request) -> fusion flush -> PostgreSQL push.
 *
 * Code here only uses @opentelemetry/api; with no SDK registered (no
 * OTEL_EXPORTER_OTLP_ENDPOINT) every call is a cheap no-op. The SDK is
 * started by telemetry/sdk.ts from main.ts.
 *
 * A flush fuses items from many callers, so its span cannot have one parent:
 * it links to each caller's span context (bounded), and the PostgreSQL push
 * span is its child.
 */
export const tracer = () => trace.getTracer('queen-ingress');

export const MAX_LINKS = 64;

/** Runs fn inside a new active span; records errors; ends the span. */
export async function inSpan<T>(name: string, opts: { kind?: SpanKind; attributes?: Record<string, string | number | boolean>; links?: Link[]; parent?: Context }, fn: (span: Span) => Promise<T>): Promise<T> {
  const parent = opts.parent ?? context.active();
  const span = tracer().startSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, attributes: opts.attributes, links: opts.links }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}

/** Extracts a W3C trace context carried as "traceparent[;tracestate]" (the frame's format). */
export function contextFromTraceHeader(header: string | undefined): Context {
  if (!header) return context.active();
  const [traceparent, tracestate] = header.split(';', 2);
  return propagation.extract(context.active(), tracestate ? { traceparent, tracestate } : { traceparent });
}

/** The active span's context as a link, if any. */
export function activeLink(): Link | undefined {
  const sc = trace.getSpanContext(context.active());
  return sc && trace.isSpanContextValid(sc) ? { context: sc } : undefined;
}

export { SpanKind };
