import { trace } from '@opentelemetry/api';
import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * JSON logs on stdout. Secrets never go in: URLs are logged redacted (config.redactUrl).
 * A line written while a span is active carries its `trace_id` and `span_id`
 * (the names OpenTelemetry's log data model and Grafana's trace links use).
 */
export function createLogger(level: string, name = 'queen-ingress'): Logger {
  return pino({ name, level, base: { pid: process.pid }, mixin: traceFields });
}

/** The active span's ids, or nothing (no span, or tracing off: the API's no-op span has no valid context). */
export function traceFields(): Record<string, string> {
  const sc = trace.getActiveSpan()?.spanContext();
  if (!sc || !trace.isSpanContextValid(sc)) return {};
  return { trace_id: sc.traceId, span_id: sc.spanId, trace_flags: `0${sc.traceFlags.toString(16)}` };
}

/** A logger that writes nothing (tests, library use). */
export const silentLogger: Logger = pino({ level: 'silent' });
