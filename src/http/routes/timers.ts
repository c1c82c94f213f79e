import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { ValidationError } from '../../errors.js';
import { cancelTimer, listTimers, peekTimer, scheduleTimer, TIMER_HORIZON_MS } from '../../engine/timerStore.js';

const SCHEDULE_FIELDS = new Set(['queue', 'partition', 'key', 'delayMs', 'deliverAt', 'payload', 'data', 'transactionId', 'traceContext']);
const MAX_LIST = 1000;

/**
 * The timer API (docs/timers.md):
 *   POST   /api/v1/timers              schedule or reschedule -> {status, messageId, transactionId}
 *   DELETE /api/v1/timers/:queue/:key  -> {status: cancelled | absent}
 *   GET    /api/v1/timers/:queue/:key  peek a pending timer (404: absent)
 *   GET    /api/v1/timers/:queue       pending timers in due order (?limit=)
 */
export function registerTimers(app: FastifyInstance, pool: pg.Pool): void {
  app.post('/api/v1/timers', async (req, reply) => {
    const body = req.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new ValidationError(
        'body must be a JSON object: {"queue", "key", "delayMs" | "deliverAt", "payload", "partition"?, "transactionId"?}',
        'body',
      );
    }
    const o = body as Record<string, unknown>;
    for (const key of Object.keys(o)) {
      if (!SCHEDULE_FIELDS.has(key)) throw new ValidationError(`unknown field "${key}" (allowed: ${[...SCHEDULE_FIELDS].join(', ')})`, key);
    }
    const now = Date.now();
    const deliverAtMs = deliverAtOf(o, now);
    const hasPayload = Object.hasOwn(o, 'payload');
    if (hasPayload === Object.hasOwn(o, 'data'))
      throw new ValidationError('give exactly one of payload or data (its alias): any JSON value', 'payload');
    if (o.partition !== undefined && typeof o.partition !== 'string') throw new ValidationError('partition must be a string', 'partition');
    if (o.traceContext !== undefined && typeof o.traceContext !== 'string')
      throw new ValidationError('traceContext must be a string', 'traceContext');
    const r = await scheduleTimer(
      pool,
      {
        queue: o.queue as string,
        partition: o.partition,
        key: o.key as string,
        deliverAtMs,
        payload: Buffer.from(JSON.stringify(hasPayload ? o.payload : o.data), 'utf8'),
        transactionId: o.transactionId as string | undefined,
        traceContext: o.traceContext,
      },
      now,
    );
    return reply.code(r.status === 'scheduled' ? 201 : 200).send(r);
  });

  app.delete<{ Params: { queue: string; key: string } }>('/api/v1/timers/:queue/:key', async (req) => {
    const cancelled = await cancelTimer(pool, req.params.queue, req.params.key);
    return { status: cancelled ? 'cancelled' : 'absent' };
  });

  app.get<{ Params: { queue: string; key: string } }>('/api/v1/timers/:queue/:key', async (req) => {
    const t = await peekTimer(pool, req.params.queue, req.params.key);
    const { payload, ...rest } = t;
    return { status: 'pending', ...rest, payload: JSON.parse(payload.toString('utf8')) as unknown };
  });

  app.get<{ Params: { queue: string }; Querystring: { limit?: string } }>('/api/v1/timers/:queue', async (req) => {
    const raw = req.query.limit;
    const limit = raw === undefined ? 100 : Number(raw);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST)
      throw new ValidationError(`limit must be an integer from 1 to ${MAX_LIST}`, 'limit');
    return { queue: req.params.queue, timers: await listTimers(pool, req.params.queue, limit) };
  });
}

/** delayMs (from now) or deliverAt (ISO 8601 or epoch ms); exactly one. A time in the past fires at the next sweep. */
function deliverAtOf(o: Record<string, unknown>, now: number): number {
  const hasDelay = o.delayMs !== undefined;
  const hasAt = o.deliverAt !== undefined;
  if (hasDelay === hasAt) throw new ValidationError('give exactly one of delayMs or deliverAt', 'delayMs');
  if (hasDelay) {
    const d = o.delayMs;
    if (typeof d !== 'number' || !Number.isInteger(d) || d < 0 || d > TIMER_HORIZON_MS) {
      throw new ValidationError(`delayMs must be an integer from 0 to ${TIMER_HORIZON_MS}`, 'delayMs');
    }
    return now + d;
  }
  const at = o.deliverAt;
  const ms = typeof at === 'number' ? at : typeof at === 'string' ? Date.parse(at) : NaN;
  if (!Number.isFinite(ms)) throw new ValidationError('deliverAt must be an ISO 8601 time or epoch milliseconds', 'deliverAt');
  return ms;
}
