import pg from 'pg';
import { DEFAULTS } from '../config.js';
import { retentionCandidates, retentionOverview, retentionStep, type RetentionStepResult } from '../engine/retentionStore.js';
import { silentLogger, type Logger } from '../telemetry/logger.js';
import type { Counter, Gauge, Histogram, MetricsRegistry } from '../telemetry/metrics.js';
import { Component } from '../util/lifecycle.js';
import { SerialLoop } from '../util/serialLoop.js';

/** Session advisory lock key of the retention leader ("queen-rt" as a 64-bit integer). */
export const RETENTION_LOCK_KEY = 0x717565656e2d7274n;

export interface RetentionServiceOptions {
  connectionString: string;
  /** Pause between passes. */
  intervalMs: number;
  /** Most segments and most log_txns rows one step removes (bounds the row-lock hold). */
  batchRows: number;
  /** Most segment bytes one step removes past its first segment (bounds the row-lock hold; default DEFAULTS.retentionBatchBytes). */
  batchBytes?: number;
  /** Partitions listed per candidate query. */
  pageSize?: number;
  metrics: MetricsRegistry;
  logger?: Logger;
  /** Called after every step (tests record what ran, and when). */
  onStep?: (partitionId: number, result: RetentionStepResult, elapsedMs: number) => void;
}

export interface PassSummary {
  /** false: another broker holds the leader lock; nothing ran. */
  leader: boolean;
  steps: number;
  segmentsRemoved: number;
  messagesRemoved: number;
  bytesRemoved: number;
  txnsRowsRemoved: number;
  maxStepMs: number;
}

/**
 * The retention service (docs/retention.md): one leader per cluster removes
 * what is past its limit, in bounded steps of one short transaction each.
 *
 * States (besides the Component lifecycle):
 *   follower --(pg_try_advisory_lock wins)--> leader
 *   leader --(its session is lost)--> follower
 * Leadership is a session-level advisory lock held by this service's own
 * connection, and every step runs on that same connection: a step can only
 * run in the session that holds the lock, and a broker that dies or loses
 * its connection releases the lock with it. So two brokers never run
 * retention at once, and a follower takes over at its next pass.
 *
 * A pass pages through partitions in ascending id and steps each one that
 * has something past its limit until its batches stop being full; a step
 * locks exactly one partition row, so the global lock order holds trivially.
 */
export class RetentionService extends Component {
  private client: pg.Client | undefined;
  private leaderState = false;
  private readonly loop: SerialLoop<PassSummary>;
  private readonly log: Logger;
  private readonly removedSegments: Counter;
  private readonly removedMessages: Counter;
  private readonly removedBytes: Counter;
  private readonly purgedTxns: Counter;
  private readonly passes: Counter;
  private readonly failures: Counter;
  private readonly stepSeconds: Histogram;
  private readonly lastPassSeconds: Gauge;
  private lag = new Map<string, { purgeLagSeconds: number; oldestRetainedAgeSeconds: number }>();

  constructor(private readonly opts: RetentionServiceOptions) {
    super('RetentionService');
    this.log = opts.logger ?? silentLogger;
    const m = opts.metrics;
    this.removedSegments = m.counter('queen_retention_removed_segments_total', 'Segments removed by retention, by queue', 'queue');
    this.removedMessages = m.counter('queen_retention_removed_messages_total', 'Messages removed by retention, by queue', 'queue');
    this.removedBytes = m.counter('queen_retention_removed_bytes_total', 'Segment bytes removed by retention, by queue', 'queue');
    this.purgedTxns = m.counter('queen_retention_purged_txns_rows_total', 'log_txns rows purged (txns_start raised), by queue', 'queue');
    this.passes = m.counter('queen_retention_passes_total', 'Retention passes run as leader');
    this.failures = m.counter('queen_retention_failures_total', 'Retention passes that failed (retried at the next interval)');
    m.gauge('queen_retention_leader', '1 while this broker holds the retention leader lock').collect(() => (this.leaderState ? 1 : 0));
    this.stepSeconds = m.histogram(
      'queen_retention_step_seconds',
      'Retention steps (one transaction holding one partition row lock), seconds',
      {
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      },
    );
    this.loop = new SerialLoop(
      () => this.pass(),
      (o) => {
        if (!o.ok) {
          this.failures.inc();
          this.log.warn({ err: (o.error as Error).message }, 'retention pass failed; retrying at the next interval');
        }
        return this.opts.intervalMs;
      },
    );
    this.lastPassSeconds = m.gauge('queen_retention_last_pass_seconds', 'Duration of the last retention pass');
    // Per queue, from the leader's last pass (a follower exports none).
    m.gauge('queen_retention_purge_lag_seconds', 'Seconds the oldest kept log_txns row is past its purge horizon', [
      'queue',
    ]).collectLabeled(() => [...this.lag].map(([queue, l]) => [{ queue }, l.purgeLagSeconds]));
    m.gauge('queen_retention_oldest_retained_age_seconds', 'Age of the oldest retained segment', ['queue']).collectLabeled(() =>
      [...this.lag].map(([queue, l]) => [{ queue }, l.oldestRetainedAgeSeconds]),
    );
  }

  get isLeader(): boolean {
    return this.leaderState;
  }

  protected async onStart(): Promise<void> {
    this.loop.start(0);
  }

  protected async onStop(): Promise<void> {
    await this.loop.halt();
    await this.dropSession();
  }

  /** One pass now (tests, and the loop). Serialised with the loop's passes. */
  runOnce(): Promise<PassSummary> {
    this.assertRunning();
    return this.loop.runNow();
  }

  private async pass(): Promise<PassSummary> {
    const sum: PassSummary = {
      leader: false,
      steps: 0,
      segmentsRemoved: 0,
      messagesRemoved: 0,
      bytesRemoved: 0,
      txnsRowsRemoved: 0,
      maxStepMs: 0,
    };
    const started = Date.now();
    try {
      const client = await this.session();
      if (!this.leaderState) {
        const r = await client.query('SELECT pg_try_advisory_lock($1::bigint) AS ok', [RETENTION_LOCK_KEY.toString()]);
        this.leaderState = r.rows[0].ok === true;
        if (this.leaderState) this.log.info('retention leader');
      }
      if (!this.leaderState) {
        this.lag = new Map();
        return sum;
      }
      sum.leader = true;
      let after = 0;
      for (;;) {
        if (this.loop.stopping) break;
        const page = await retentionCandidates(client, after, this.opts.pageSize ?? 500);
        for (const pid of page.ids) {
          for (;;) {
            // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- stop() sets it while a retention step awaits
            if (this.loop.stopping) break;
            const t0 = performance.now();
            const r = await retentionStep(client, pid, this.opts.batchRows, this.opts.batchBytes ?? DEFAULTS.retentionBatchBytes);
            const ms = performance.now() - t0;
            if (!r) break;
            this.account(sum, r, ms);
            this.opts.onStep?.(pid, r, ms);
            if (!r.more) break;
          }
        }
        if (page.lastId === null) break;
        after = page.lastId;
      }
      if (!this.loop.stopping) this.lag = new Map((await retentionOverview(client)).map((o) => [o.queue, o]));
      this.passes.inc();
      this.lastPassSeconds.set((Date.now() - started) / 1000);
      return sum;
    } catch (err) {
      // A lost session has lost the lock too: start over as a follower.
      await this.dropSession();
      throw err;
    }
  }

  private account(sum: PassSummary, r: RetentionStepResult, ms: number): void {
    sum.steps++;
    this.stepSeconds.observe(ms / 1000);
    sum.maxStepMs = Math.max(sum.maxStepMs, ms);
    sum.segmentsRemoved += r.segmentsRemoved;
    sum.messagesRemoved += r.messagesRemoved;
    sum.bytesRemoved += r.bytesRemoved;
    sum.txnsRowsRemoved += r.txnsRowsRemoved;
    if (r.segmentsRemoved > 0) {
      this.removedSegments.inc(r.segmentsRemoved, r.queue);
      this.removedMessages.inc(r.messagesRemoved, r.queue);
      this.removedBytes.inc(r.bytesRemoved, r.queue);
    }
    if (r.txnsRowsRemoved > 0) this.purgedTxns.inc(r.txnsRowsRemoved, r.queue);
  }

  private async session(): Promise<pg.Client> {
    if (this.client) return this.client;
    const client = new pg.Client({ connectionString: this.opts.connectionString, application_name: 'queen-retention' });
    // A dropped connection surfaces as a failed query; without a listener the 'error' event would crash the process.
    client.on('error', () => undefined);
    await client.connect();
    this.client = client;
    return client;
  }

  private async dropSession(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    if (this.leaderState) this.log.info('retention leadership released');
    this.leaderState = false;
    // Closing the session releases the advisory lock.
    if (c) await c.end().catch(() => undefined);
  }
}
