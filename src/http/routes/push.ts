import type { FastifyInstance } from 'fastify';
import type { PushItem, PushResult } from '../../engine/writer.js';
import type { Counter } from '../../telemetry/metrics.js';
import { MAX_LINKS, recording, spanContextOf, verdictAttributes } from '../../telemetry/tracing.js';
import { trace, type Link } from '@opentelemetry/api';
import { OverloadedError } from '../errorStatus.js';
import { readItems, toWire, translateItem, type WireResult } from '../pushBody.js';

/** What the push route needs from the fusion layer (Fusion satisfies it). */
export interface PushPath {
  submit(items: readonly PushItem[]): Promise<PushResult[]>;
  readonly overloaded: boolean;
}

/**
 * POST /api/v1/push: 201 with one result per item, in request order.
 * The items go through the same fusion layer (and so the same dedup cache
 * and SQL probe) as Kafka ingress.
 */
export function registerPush(app: FastifyInstance, path: PushPath, maxItems: number, verdicts?: Counter): void {
  app.post('/api/v1/push', async (req, reply) => {
    const raw = readItems(req.body, maxItems);
    const results = new Array<WireResult>(raw.length);
    const items: PushItem[] = [];
    const at: number[] = [];
    raw.forEach((r, index) => {
      const t = translateItem(r);
      if (t.ok) {
        items.push(t.item);
        at.push(index);
      } else {
        results[index] = { index, ...t.result };
      }
    });
    if (items.length > 0) {
      // Shed load instead of buffering without bound; the Kafka ingress
      // pauses fetching on the same signal.
      if (path.overloaded) throw new OverloadedError('the push path is over its in-flight byte budget; retry later');
      const pushed = await path.submit(items);
      pushed.forEach((r, i) => {
        results[at[i]!] = toWire(at[i]!, r);
      });
    }
    // The request's server span (continuing its traceparent) links to each item's own traceContext.
    const span = trace.getActiveSpan();
    if (recording(span)) {
      const links: Link[] = [];
      for (const r of raw) {
        // r is one element of a JSON body: null may arrive.
        const sc =
          typeof (r as { traceContext?: unknown } | null | undefined)?.traceContext === 'string'
            ? spanContextOf((r as { traceContext: string }).traceContext)
            : undefined;
        if (sc && links.length < MAX_LINKS) links.push({ context: sc });
      }
      span.addLinks(links);
      span.setAttributes({ 'messaging.batch.message_count': raw.length, ...verdictAttributes(results) });
    }
    if (verdicts) {
      const n = { queued: 0, duplicate: 0, failed: 0 };
      for (const r of results) n[r.status]++;
      for (const [status, count] of Object.entries(n)) verdicts.inc(count, { source: 'http', status });
    }
    return reply.code(201).send(results);
  });
}
