import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type pg from 'pg';
import { toDatabaseError } from '../../engine/sqlstate.js';
import { DatabaseError } from '../../errors.js';
import type { MetricsRegistry } from '../../telemetry/metrics.js';

/** What the Kafka ingress reports for readiness (KafkaIngress.status()); undefined: no ingress configured. */
export type IngressReadiness = () => { ready: boolean; reasons: string[]; state: string; crashes: number } | undefined;

/**
 * Health (docs/operations.md), GET /metrics. All are outside /api and so
 * never need the token: kubelets, load balancers and Prometheus call them
 * without credentials, and none reveals message data.
 *
 *   /health/live  (/livez)   the process and its event loop answer; nothing
 *                            external is consulted, so a PostgreSQL or Kafka
 *                            outage never gets a healthy pod restarted.
 *   /health/ready (/readyz)  PostgreSQL answers SELECT 1 within the timeout
 *                            and, when Kafka ingress runs, its consumer is a
 *                            live group member, not stuck, nothing halted.
 *   /health                  the same verdict as /health/ready (it used to
 *                            check PostgreSQL only); its 200 body stays {"status":"ok"}.
 */
export function registerOps(
  app: FastifyInstance,
  pool: pg.Pool,
  metrics: MetricsRegistry,
  healthTimeoutMs: number,
  ingress?: IngressReadiness,
): void {
  const startedAt = Date.now();
  const live = async () => ({ status: 'alive', uptimeSeconds: Math.floor((Date.now() - startedAt) / 1000) });
  app.get('/health/live', live);
  app.get('/livez', live);

  const ready = async (req: FastifyRequest, reply: FastifyReply) => {
    // Throws a retriable DatabaseError when PostgreSQL does not answer; the
    // error handler turns that into 503 with Retry-After.
    await withTimeout(pool.query('SELECT 1'), healthTimeoutMs);
    const kafka = ingress?.();
    if (kafka && !kafka.ready) {
      void reply.code(503).header('retry-after', '1');
      return {
        status: 'not_ready',
        error: 'not_ready',
        message: `Kafka ingress not ready: ${kafka.reasons.join('; ')}`,
        retriable: true,
        checks: { postgres: 'ok', kafka },
      };
    }
    // /health keeps its original body ({"status":"ok"}) for existing checks; the probes get the details.
    if (req.routeOptions.url === '/health') return { status: 'ok' };
    return { status: 'ok', checks: { postgres: 'ok', ...(kafka ? { kafka } : {}) } };
  };
  app.get('/health', ready);
  app.get('/health/ready', ready);
  app.get('/readyz', ready);

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
