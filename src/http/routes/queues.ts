import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { ValidationError } from '../../errors.js';
import { configureQueue, getQueue } from '../../engine/queueConfig.js';
import { listQueues } from '../../engine/queueList.js';

const CONFIGURE_FIELDS = new Set(['queue', 'options', 'mode']);

/**
 * POST /api/v1/configure and GET /api/v1/resources/queues/:queue.
 * The merge/replace/null semantics live in SQL (queue_configure_v1) and are
 * documented in docs/configure.md; this layer only checks the envelope.
 */
export function registerQueues(app: FastifyInstance, pool: pg.Pool): void {
  app.post('/api/v1/configure', async (req) => {
    const body = req.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new ValidationError('body must be a JSON object: {"queue": ..., "options": {...}, "mode"?: "merge" | "replace"}', 'body');
    }
    for (const key of Object.keys(body)) {
      if (!CONFIGURE_FIELDS.has(key)) throw new ValidationError(`unknown field "${key}" (allowed: queue, options, mode)`, key);
    }
    const { queue, options, mode } = body as { queue?: unknown; options?: unknown; mode?: unknown };
    const r = await configureQueue(pool, queue as string, options, mode);
    return { queue, created: r.created, options: r.options };
  });

  app.get<{ Params: { queue: string } }>('/api/v1/resources/queues/:queue', async (req) => getQueue(pool, req.params.queue));

  // GET /api/v1/resources/queues[?after=NAME&limit=N]: a page of queues by name.
  app.get<{ Querystring: { after?: string; limit?: string } }>('/api/v1/resources/queues', async (req) =>
    listQueues(pool, req.query.after, req.query.limit),
  );
}
