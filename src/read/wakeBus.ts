import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { LogEngine } from '../engine/logEngine.js';
import type { Logger } from '../telemetry/logger.js';
import { silentLogger } from '../telemetry/logger.js';
import type { Counter, MetricsRegistry } from '../telemetry/metrics.js';
import { Component } from '../util/lifecycle.js';
import type { PopWaiters } from './waiters.js';

/** The PostgreSQL channel brokers announce appended queues on. */
export const WAKE_CHANNEL = 'queen_log_append';
/** NOTIFY payloads must stay under 8000 bytes. */
const MAX_PAYLOAD = 7000;

/**
 * Wakes long polls when messages become available, without polling:
 *
 *  - in process: the engine announces every committed append (partition ids);
 *    the bus maps them to queue names (a memo, filled by pops and by one
 *    lookup on a miss) and wakes that queue's waiters at once;
 *  - across brokers: the same queue names are sent with pg_notify on the
 *    channel `queen_log_append` (coalesced: at most one NOTIFY in flight, the
 *    next one carries everything that arrived meanwhile), and every broker
 *    LISTENs on a dedicated connection and wakes its own waiters.
 *
 * The NOTIFY is sent from its own short transaction after the push committed,
 * never from inside the push: NOTIFY serialises committing transactions on
 * a global lock, and the push path must not pay that.
 *
 * States: Component lifecycle. While running and connected, notifications
 * flow; a lost LISTEN connection is re-opened with backoff (long polls still
 * re-check on their safety interval meanwhile).
 */
export class WakeBus extends Component {
  private readonly instance = randomUUID();
  private readonly queueOf = new Map<number, string>();
  private listener: pg.Client | undefined;
  private unsubscribe: (() => void) | undefined;
  private pendingNotify = new Set<string>();
  private notifying = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private readonly log: Logger;
  private readonly wakes: Counter;

  constructor(
    private readonly engine: LogEngine,
    private readonly waiters: PopWaiters,
    private readonly connectionString: string | undefined,
    metrics: MetricsRegistry,
    logger?: Logger,
  ) {
    super('WakeBus');
    this.log = logger ?? silentLogger;
    this.wakes = metrics.counter('queen_pop_wakes_total', 'Long-poll wake-ups by source', 'source');
  }

  protected async onStart(): Promise<void> {
    this.unsubscribe = this.engine.onAppended((pids) => void this.appended(pids));
    if (this.connectionString) await this.listen();
  }

  protected async onStop(): Promise<void> {
    this.unsubscribe?.();
    clearTimeout(this.reconnectTimer);
    const l = this.listener;
    this.listener = undefined;
    await l?.end().catch(() => undefined);
  }

  /** A pop learned which queue a partition belongs to. */
  remember(partitionId: number, queue: string): void {
    if (this.queueOf.size > 100_000) this.queueOf.clear();
    this.queueOf.set(partitionId, queue);
  }

  /** Messages of these partitions became available (appended or released). */
  async appended(partitionIds: readonly number[]): Promise<void> {
    if (this.state !== 'running') return;
    try {
      const queues = await this.queuesOf(partitionIds);
      for (const q of queues) {
        if (this.waiters.wake(q) > 0) this.wakes.inc(1, 'local');
        this.pendingNotify.add(q);
      }
      void this.flushNotify();
    } catch (err) {
      this.log.warn(
        { err: (err as Error).message },
        'could not map partitions to queues for a wake-up; long polls re-check on their interval',
      );
    }
  }

  private async queuesOf(pids: readonly number[]): Promise<Set<string>> {
    const out = new Set<string>();
    const missing: number[] = [];
    for (const p of pids) {
      const q = this.queueOf.get(p);
      if (q !== undefined) out.add(q);
      else missing.push(p);
    }
    if (missing.length > 0) {
      const r = await this.engine.pool.query(
        'SELECT lp.id, q.name FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE lp.id = ANY($1::bigint[])',
        [missing],
      );
      for (const row of r.rows) {
        this.remember(row.id, row.name);
        out.add(row.name);
      }
    }
    return out;
  }

  private async flushNotify(): Promise<void> {
    if (this.notifying || this.pendingNotify.size === 0 || !this.connectionString) {
      if (!this.connectionString) this.pendingNotify.clear();
      return;
    }
    this.notifying = true;
    try {
      while (this.pendingNotify.size > 0 && this.state === 'running') {
        const queues = [...this.pendingNotify];
        this.pendingNotify.clear();
        let payload = this.instance;
        for (const q of queues) {
          if (payload.length + q.length + 1 > MAX_PAYLOAD) {
            await this.engine.pool.query('SELECT pg_notify($1, $2)', [WAKE_CHANNEL, payload]);
            payload = this.instance;
          }
          payload += `\n${q}`;
        }
        await this.engine.pool.query('SELECT pg_notify($1, $2)', [WAKE_CHANNEL, payload]);
      }
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cross-broker wake-up NOTIFY failed; other brokers re-check on their interval');
    } finally {
      this.notifying = false;
    }
  }

  private async listen(): Promise<void> {
    const c = new pg.Client({ connectionString: this.connectionString, application_name: 'queen-ingress-listen' });
    c.on('error', () => undefined);
    c.on('notification', (n) => {
      if (n.channel !== WAKE_CHANNEL || !n.payload) return;
      const [from, ...queues] = n.payload.split('\n');
      if (from === this.instance) return;
      for (const q of queues) if (this.waiters.wake(q) > 0) this.wakes.inc(1, 'notify');
    });
    c.on('end', () => {
      if (this.listener !== c || this.state !== 'running') return;
      this.listener = undefined;
      // Whatever was announced while we were away: wake everyone to re-check.
      this.waiters.wakeAll();
      this.scheduleReconnect(250);
    });
    await c.connect();
    // The channel is a constant (WAKE_CHANNEL): LISTEN takes no parameters.
    await c.query('LISTEN queen_log_append');
    this.listener = c;
  }

  private scheduleReconnect(ms: number): void {
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      if (this.state !== 'running') return;
      this.listen().catch(() => this.scheduleReconnect(Math.min(ms * 2, 5_000)));
    }, ms);
    this.reconnectTimer.unref();
  }
}
