import pg from 'pg';
import { canVacuumLogTables, cancelBackend, vacuumLogTables } from '../engine/retentionStore.js';
import type { Logger } from '../telemetry/logger.js';
import type { Counter, Histogram, MetricsRegistry } from '../telemetry/metrics.js';

export interface LogVacuumOptions {
  connectionString: string;
  /** Least time between the starts of two vacuums (0: never vacuum; autovacuum alone reclaims the space). */
  minIntervalMs: number;
  metrics: MetricsRegistry;
  logger: Logger;
  /** Called after each vacuum that ran to its end (tests wait on it). */
  onVacuum?: (elapsedMs: number) => void;
}

/**
 * VACUUM of log_segments and log_txns, run by the retention leader while
 * its steps remove rows (docs/retention.md, "Reclaiming the space").
 *
 * Why the leader does it and not only autovacuum: PostgreSQL reuses the space
 * of deleted rows only after a vacuum has recorded it in the free-space map,
 * and autovacuum visits a database at most once per `autovacuum_naptime`
 * (1 min by default), whatever the per-table thresholds (sql/000023). Under
 * steady retention a minute of deletions is dead space the inserts cannot
 * reuse, so the tables settle at live data plus that minute (+12 % in the
 * 30-minute soak at 300 s retention). Vacuuming every minIntervalMs (10 s by
 * default) bounds it at about that much of deletions instead.
 *
 * States:
 *   unchecked --(first kick: may vacuum)--> idle --(kick)--> running --(done)--> idle
 *   unchecked --(first kick: not the tables' owner)--> disabled (logged once; autovacuum still runs)
 *   any --(stop)--> stopped (a running vacuum is cancelled and awaited)
 * A kick while running, or sooner than minIntervalMs after the last start, is
 * ignored: the next step that removes rows kicks again. At most one vacuum per broker, and
 * SKIP_LOCKED makes one that meets autovacuum (or a former leader's vacuum)
 * skip the table instead of waiting.
 */
export class LogVacuum {
  private state: 'unchecked' | 'idle' | 'running' | 'disabled' | 'stopped' = 'unchecked';
  private client: pg.Client | undefined;
  /** The vacuum session's backend, for stop() to cancel a running vacuum. */
  private backendPid: number | undefined;
  private running: Promise<void> | undefined;
  private lastStart = -Infinity;
  private checked = false;
  private readonly seconds: Histogram;
  private readonly failures: Counter;

  constructor(private readonly opts: LogVacuumOptions) {
    this.seconds = opts.metrics.histogram(
      'queen_retention_vacuum_seconds',
      'VACUUM of log_segments and log_txns run by the retention leader while its steps remove rows, seconds',
      { buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] },
    );
    this.failures = opts.metrics.counter(
      'queen_retention_vacuum_failures_total',
      "The retention leader's VACUUMs that failed (retried after the next pass that removes rows)",
    );
  }

  /** A step removed rows: vacuum now, in the background, unless one runs or ran too recently. */
  kick(): void {
    if (this.opts.minIntervalMs <= 0 || this.state === 'running' || this.state === 'disabled' || this.state === 'stopped') return;
    const now = performance.now();
    if (now - this.lastStart < this.opts.minIntervalMs) return;
    this.lastStart = now;
    this.state = 'running';
    this.running = this.run().finally(() => {
      this.running = undefined;
      if (this.state === 'running') this.state = 'idle';
    });
  }

  /** Cancels a running vacuum, waits for it, and closes the session. */
  async stop(): Promise<void> {
    const wasRunning = this.state === 'running';
    this.state = 'stopped';
    const c = this.client;
    const pid = this.backendPid;
    if (wasRunning && this.running && pid !== undefined) {
      // A vacuum of a large table can take a while; stopping must not. The
      // session itself cannot interrupt its own statement, so a second one asks.
      const canceller = new pg.Client({ connectionString: this.opts.connectionString, application_name: 'queen-retention-cancel' });
      canceller.on('error', () => undefined);
      try {
        await canceller.connect();
        await cancelBackend(canceller, pid);
      } catch {
        // The vacuum then ends on its own; stop() still waits for it below.
      } finally {
        await canceller.end().catch(() => undefined);
      }
    }
    await this.running;
    this.client = undefined;
    if (c) await c.end().catch(() => undefined);
  }

  private async run(): Promise<void> {
    const t0 = performance.now();
    try {
      const c = await this.session();
      if (this.state !== 'running') return;
      if (!this.checked) {
        // Once per LogVacuum: ownership does not come and go while the service runs.
        this.checked = true;
        if (!(await canVacuumLogTables(c))) {
          this.state = 'disabled';
          this.opts.logger.info(
            'the retention leader may not VACUUM queen.log_segments / queen.log_txns (not their owner): autovacuum alone reclaims their space',
          );
          return;
        }
      }
      await vacuumLogTables(c);
      const ms = performance.now() - t0;
      this.seconds.observe(ms / 1000);
      this.opts.onVacuum?.(ms);
    } catch (err) {
      // A vacuum cancelled by stop() is not a failure.
      if (this.state === 'stopped') return;
      this.failures.inc();
      this.opts.logger.warn(
        { err: (err as Error).message },
        'vacuum of the log tables failed; retried after the next pass that removes rows',
      );
      await this.dropSession();
    }
  }

  private async session(): Promise<pg.Client> {
    if (this.client) return this.client;
    const c = new pg.Client({ connectionString: this.opts.connectionString, application_name: 'queen-retention-vacuum' });
    // A dropped connection surfaces as a failed query; without a listener the 'error' event would crash the process.
    c.on('error', () => undefined);
    this.client = c;
    await c.connect();
    const r = await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    this.backendPid = r.rows[0]?.pid;
    return c;
  }

  private async dropSession(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    this.backendPid = undefined;
    if (c) await c.end().catch(() => undefined);
  }
}
