import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { toDatabaseError } from '../../engine/sqlstate.js';
import { DatabaseError } from '../../errors.js';
import type { MetricsRegistry } from '../../telemetry/metrics.js';

/**
 * GET /health and GET /metrics. Both are outside /api and so never need the
 * token: load balancers and Prometheus scrape them without credentials, and
 * neither reveals message data.
 */
export function registerOps(app: FastifyInstance, pool: pg.Pool, metrics: MetricsRegistry, healthTimeoutMs: number): void {
  app.get('/health', async () => {
    // Throws a retriable DatabaseError when PostgreSQL does not answer; the
    // error handler turns that into 503 with Retry-After.
    await withTimeout(pool.query('SELECT 1'), healthTimeoutMs);
    return { status: 'ok' };
  });

  app.get('/metrics', async (_req, reply) => {
    reply.type(metrics.contentType);
    return metrics.render();
  });
}

async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  // If the timeout wins, a late rejection of p must not become unhandled.
  p.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DatabaseError(`PostgreSQL did not answer within ${ms} ms`, undefined, { retriable: true })), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } catch (err) {
    throw toDatabaseError(err, 'health check');
  } finally {
    clearTimeout(timer);
  }
}
