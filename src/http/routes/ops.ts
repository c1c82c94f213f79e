import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type pg from 'pg';
import { toDatabaseError } from '../../engine/sqlstate.js';
import { DatabaseError } from '../../errors.js';
import type { MetricsRegistry } from '../../telemetry/metrics.js';

/** What the Kafka ingress reports for readiness (KafkaIngress.status()); undefined: no ingress configured. */
export type IngressReadiness = () => { ready: boolean; reasons: string[]; state: string; crashes: number } | undefined;

/** One worker's own readiness, as it answers the primary (docs/scaling.md). */
export interface WorkerReadiness {
  slot: number;
  pid: number;
  ready: boolean;
  reasons: string[];
}

/** The pod's readiness: every worker slot filled by a worker that answered ready. */
export interface FleetReadiness {
  ready: boolean;
  /** Why not (a missing, silent or unready worker), empty when ready. */
  reasons: string[];
  workers: WorkerReadiness[];
}

/**
 * The whole pod, seen from one worker process (QUEEN_WORKERS > 1): the
 * primary answers for every worker, so a probe or scrape that lands on any
 * worker gets the same pod-wide answer (docs/scaling.md).
 */
export interface FleetView {
  /** This worker's slot (named in /health/live, which answers for the process it reached). */
  readonly slot: number;
  /** Prometheus text summed over the workers (prom-client's AggregatorRegistry, in the primary). */
  metrics(): Promise<string>;
  /** Never rejects: a primary that does not answer in time yields not ready. */
  readiness(): Promise<FleetReadiness>;
}

/**
 * One process's own readiness, without throwing: PostgreSQL answers within
 * the timeout and, when Kafka ingress runs, its consumer is ready. What a
 * worker reports to the primary; the same checks as the single process's
 * /health/ready.
 */
export async function localReadiness(
  pool: pg.Pool,
  healthTimeoutMs: number,
  ingress?: IngressReadiness,
): Promise<{ ready: boolean; reasons: string[] }> {
  const reasons: string[] = [];
  try {
    await withTimeout(pool.query('SELECT 1'), healthTimeoutMs);
  } catch (err) {
    reasons.push(`PostgreSQL: ${(err as Error).message}`);
  }
  const kafka = ingress?.();
  if (kafka && !kafka.ready) reasons.push(`Kafka ingress not ready: ${kafka.reasons.join('; ')}`);
  return { ready: reasons.length === 0, reasons };
}

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
 *
 * With workers (`fleet` given), /health/ready and /metrics answer for the
 * whole pod, whichever worker the connection landed on: ready only when
 * every worker is (a worker whose consumer is stuck makes the pod not
 * ready), and metrics summed over the workers. /health/live stays local: the
 * process that answers is alive.
 */
export function registerOps(
  app: FastifyInstance,
  pool: pg.Pool,
  metrics: MetricsRegistry,
  healthTimeoutMs: number,
  ingress?: IngressReadiness,
  fleet?: FleetView,
): void {
  const startedAt = Date.now();
  // With workers, liveness names the worker that answered: the probe checked that process, no other.
  const self = fleet ? { worker: { slot: fleet.slot, pid: process.pid } } : {};
  const live = async () => ({ status: 'alive', uptimeSeconds: Math.floor((Date.now() - startedAt) / 1000), ...self });
  app.get('/health/live', live);
  app.get('/livez', live);

  const fleetReady = async (req: FastifyRequest, reply: FastifyReply, f: FleetView) => {
    const verdict = await f.readiness();
    if (!verdict.ready) {
      void reply.code(503).header('retry-after', '1');
      return {
        status: 'not_ready',
        error: 'not_ready',
        message: `not ready: ${verdict.reasons.join('; ')}`,
        retriable: true,
        checks: { workers: verdict.workers },
      };
    }
    if (req.routeOptions.url === '/health') return { status: 'ok' };
    return { status: 'ok', checks: { workers: verdict.workers } };
  };

  const ready = async (req: FastifyRequest, reply: FastifyReply) => {
    if (fleet) return fleetReady(req, reply, fleet);
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
    return fleet ? fleet.metrics() : metrics.render();
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
