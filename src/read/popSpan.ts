import { trace, type Link } from '@opentelemetry/api';
import type { PopOutcome, PopRequest } from '../engine/pop.js';
import { contextFromTraceHeader, MAX_LINKS, SpanKind, tracer } from '../telemetry/tracing.js';

/**
 * One CONSUMER span per pop that delivered messages, linked to each
 * message's producer span (the W3C context stored in its frame), so a trace
 * continues from push to delivery. A pop delivers many messages from many
 * producers, so it links (bounded by MAX_LINKS) instead of picking a parent.
 * A no-op without an SDK registered.
 */
export function recordPopSpan(req: PopRequest, r: PopOutcome, startedMs: number): void {
  const links: Link[] = [];
  const seen = new Set<string>();
  for (const m of r.messages) {
    if (links.length >= MAX_LINKS) break;
    if (!m.traceContext || seen.has(m.traceContext)) continue;
    seen.add(m.traceContext);
    const sc = trace.getSpanContext(contextFromTraceHeader(m.traceContext));
    if (sc && trace.isSpanContextValid(sc)) links.push({ context: sc });
  }
  const span = tracer().startSpan('queen.pop', {
    kind: SpanKind.CONSUMER,
    startTime: startedMs,
    links,
    attributes: {
      'messaging.system': 'queen',
      'messaging.operation.type': 'receive',
      'messaging.destination.name': req.queue,
      'messaging.consumer.group.name': req.consumerGroup,
      'messaging.batch.message_count': r.messages.length,
      'queen.partition_id': r.partitionId ?? -1,
    },
  });
  span.end();
}
