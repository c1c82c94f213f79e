import {
  context,
  propagation,
  trace,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
} from '@opentelemetry/api';

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
export async function inSpan<T>(
  name: string,
  opts: { kind?: SpanKind; attributes?: Record<string, string | number | boolean>; links?: Link[]; parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
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

/**
 * The parent rule for a span that serves many upstream contexts (a Kafka
 * chunk of records, a fusion bundle of submitters): when they all share one
 * span context, that context is the parent, so the upstream trace continues
 * through us; otherwise the span stays under `fallback` and links to each
 * distinct upstream context (at most MAX_LINKS). Deterministic: the order of
 * `contexts` decides which contexts become links.
 */
export function parentOrLinks(contexts: readonly SpanContext[], fallback: Context = context.active()): { parent: Context; links: Link[] } {
  const distinct: SpanContext[] = [];
  const seen = new Set<string>();
  for (const sc of contexts) {
    const key = `${sc.traceId}/${sc.spanId}`;
    if (seen.has(key)) continue;
    seen.add(key);
    distinct.push(sc);
    if (distinct.length > MAX_LINKS) break;
  }
  if (distinct.length === 1) return { parent: trace.setSpanContext(fallback, distinct[0]!), links: [] };
  return { parent: fallback, links: distinct.slice(0, MAX_LINKS).map((c) => ({ context: c })) };
}

/** A W3C "traceparent[;tracestate]" as a span context, if it is a valid one. */
export function spanContextOf(header: string | undefined): SpanContext | undefined {
  if (!header) return undefined;
  const sc = trace.getSpanContext(contextFromTraceHeader(header));
  return sc && trace.isSpanContextValid(sc) ? sc : undefined;
}

/** Whether a span is being recorded (tracing on and sampled): guards work done only for attributes. */
export function recording(span: Span | undefined): span is Span {
  return span?.isRecording() ?? false;
}

/** `queen.verdict.{queued,duplicate,failed}` counts of a set of results, as span attributes. */
export function verdictAttributes(results: Iterable<{ status: 'queued' | 'duplicate' | 'failed' }>): Record<string, number> {
  const n = { queued: 0, duplicate: 0, failed: 0 };
  for (const r of results) n[r.status]++;
  return { 'queen.verdict.queued': n.queued, 'queen.verdict.duplicate': n.duplicate, 'queen.verdict.failed': n.failed };
}

/** The active span's context as a link, if any. */
export function activeLink(): Link | undefined {
  const sc = trace.getSpanContext(context.active());
  return sc && trace.isSpanContextValid(sc) ? { context: sc } : undefined;
}

export { SpanKind };
