// One file (~420 lines), on purpose: leadership, the step sessions and the
// fence (RETENTION_LOCK_KEY, RETENTION_FENCE_KEY) are one state machine whose
// safety argument ("two brokers never run retention steps at once") needs
// the session handling and the pass in one place. The work list
// (partitionQueue.ts), the vacuum (logVacuum.ts) and the SQL
// (engine/retentionStore.ts) are already files of their own.

import pg from 'pg';
import { DEFAULTS } from '../config.js';
import { setUpSession } from '../engine/session.js';
import { consumerLag, retentionCandidates, retentionOverview, retentionStep, type RetentionStepResult } from '../engine/retentionStore.js';
import { QueenError } from '../errors.js';
import { silentLogger, type Logger } from '../telemetry/logger.js';
import type { Counter, Gauge, Histogram, MetricsRegistry } from '../telemetry/metrics.js';
import { Component } from '../util/lifecycle.js';
import { SerialLoop } from '../util/serialLoop.js';
import { LogVacuum } from './logVacuum.js';
import { PartitionQueue } from './partitionQueue.js';

/** Session advisory lock key of the retention leader ("queen-rt" as a 64-bit integer). */
export const RETENTION_LOCK_KEY = 0x717565656e2d7274n;
/**
 * Advisory lock key of the leader's step sessions ("queen-rf"): each holds it
 * SHARED for its life; a new leader takes it exclusively once (and lets go)
 * before it opens its own, so it never steps while a former leader's step
 * sessions still exist (docs/retention.md, "One leader, several sessions").
 */
export const RETENTION_FENCE_KEY = 0x717565656e2d7266n;

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
  /** Steps run at once, each on its own session and always on distinct partitions (default DEFAULTS.retentionConcurrency). */
  concurrency?: number;
  /**
   * Least time between two VACUUMs of the log tables that the leader runs
   * while its steps remove rows (0: leave it to autovacuum; default
   * DEFAULTS.retentionVacuumIntervalMs). See LogVacuum.
   */
  vacuumIntervalMs?: number;
  metrics: MetricsRegistry;
  logger?: Logger;
  /** Called after each leader VACUUM of the log tables that ran to its end. */
  onVacuum?: (elapsedMs: number) => void;
  /** Called after every step (tests record what ran, and when). */
  onStep?: (partitionId: number, result: RetentionStepResult, elapsedMs: number) => void;
  /** Called right before a step is sent (tests observe which steps overlap). */
  onStepBegin?: (partitionId: number) => void;
  /**
   * Called after every pass that returned, the loop's own and runOnce()'s
   * alike. Tests wait with it for the automatic pass at start to be over: a
   * runOnce() called right after start() runs before that pass, not after it.
   */
  onPass?: (summary: PassSummary) => void;
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
  /** Most steps that were in flight at the same moment during the pass. */
  peakConcurrentSteps: number;
  /** Steps that failed with a retriable error (logged, partition retried at the next pass). */
  failedSteps: number;
}

/**
 * The retention service (docs/retention.md): one leader per cluster removes
 * what is past its limit, in bounded steps of one short transaction each.
 *
 * States (besides the Component lifecycle):
 *   follower --(pg_try_advisory_lock wins)--> leader
 *   leader --(its session is lost)--> follower
 * Leadership is a session-level advisory lock held by this service's own
 * connection (the leader session), and a broker that dies or loses that
 * connection releases the lock with it; a follower takes over at its next
 * pass. Steps run on `concurrency` step sessions of the leader, each holding
 * RETENTION_FENCE_KEY shared and opened only after the leader session
 * answered, and a new leader first proves (an exclusive try on the fence)
 * that no earlier leader's step session is left. So two brokers never run
 * retention steps at once.
 *
 * A pass pages through partitions in ascending id (on the leader session)
 * into a PartitionQueue; the step sessions take partitions from it, so steps
 * on DISTINCT partitions overlap and one partition is never stepped twice at
 * once. A partition whose batch was full goes back to the tail until it is
 * done (fair to the others). A step locks exactly one partition row, then its
 * cursor rows, so concurrent steps never wait on each other and the global
 * lock order holds trivially (docs/retention.md).
 */
export class RetentionService extends Component {
  private client: pg.Client | undefined;
  /** Step sessions by slot (undefined: not open); they exist only while leaderState and fenced. */
  private workers: (pg.Client | undefined)[] = [];
  private leaderState = false;
  /** The fence was passed since this leadership began (see RETENTION_FENCE_KEY). */
  private fenced = false;
  private inFlightSteps = 0;
  private readonly concurrency: number;
  private readonly loop: SerialLoop<PassSummary>;
  private readonly vacuum: LogVacuum;
  private readonly log: Logger;
  private readonly removedSegments: Counter;
  private readonly removedMessages: Counter;
  private readonly removedBytes: Counter;
  private readonly purgedTxns: Counter;
  private readonly passes: Counter;
  private readonly failures: Counter;
  private readonly stepFailures: Counter;
  private readonly stepSeconds: Histogram;
  private readonly lastPassSeconds: Gauge;
  private lag = new Map<string, { purgeLagSeconds: number; oldestRetainedAgeSeconds: number }>();
  /** Consumer lag per (queue, group) from the leader's last pass (empty on a follower). */
  private groupLag: { queue: string; group: string; lagMessages: number; partitionsBehind: number }[] = [];

  constructor(private readonly opts: RetentionServiceOptions) {
    super('RetentionService');
    this.log = opts.logger ?? silentLogger;
    this.concurrency = opts.concurrency ?? DEFAULTS.retentionConcurrency;
    if (!Number.isSafeInteger(this.concurrency) || this.concurrency < 1)
      throw new RangeError('retention concurrency must be an integer >= 1');
    const m = opts.metrics;
    this.removedSegments = m.counter('queen_retention_removed_segments_total', 'Segments removed by retention, by queue', 'queue');
    this.removedMessages = m.counter('queen_retention_removed_messages_total', 'Messages removed by retention, by queue', 'queue');
    this.removedBytes = m.counter('queen_retention_removed_bytes_total', 'Segment bytes removed by retention, by queue', 'queue');
    this.purgedTxns = m.counter('queen_retention_purged_txns_rows_total', 'log_txns rows purged (txns_start raised), by queue', 'queue');
    this.passes = m.counter('queen_retention_passes_total', 'Retention passes run as leader');
    this.failures = m.counter('queen_retention_failures_total', 'Retention passes that failed (retried at the next interval)');
    this.stepFailures = m.counter(
      'queen_retention_step_failures_total',
      'Retention steps that failed with a retriable error (the partition is retried at the next pass)',
    );
    m.gauge('queen_retention_steps_in_flight', 'Retention steps running right now (at most QUEEN_RETENTION_CONCURRENCY)').collect(
      () => this.inFlightSteps,
    );
    m.gauge('queen_retention_leader', '1 while this broker holds the retention leader lock').collect(() => (this.leaderState ? 1 : 0));
    this.stepSeconds = m.histogram(
      'queen_retention_step_seconds',
      'Retention steps (one transaction holding one partition row lock), seconds',
      {
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      },
    );
    this.vacuum = new LogVacuum({
      connectionString: opts.connectionString,
      minIntervalMs: opts.vacuumIntervalMs ?? DEFAULTS.retentionVacuumIntervalMs,
      metrics: m,
      logger: this.log,
      ...(opts.onVacuum ? { onVacuum: opts.onVacuum } : {}),
    });
    this.loop = new SerialLoop(
      async () => {
        const sum = await this.pass();
        this.opts.onPass?.(sum);
        return sum;
      },
      (o) => {
        if (!o.ok) {
          this.failures.inc();
          this.log.warn({ err: (o.error as Error).message }, 'retention pass failed; retrying at the next interval');
        }
        return this.opts.intervalMs;
      },
    );
    this.lastPassSeconds = m.gauge('queen_retention_last_pass_seconds', 'Duration of the last retention pass', [], 'max');
    // Per queue, from the leader's last pass (a follower exports none). `max`
    // over a pod's workers: a series one worker reports is never multiplied.
    m.gauge(
      'queen_retention_purge_lag_seconds',
      'Seconds the oldest kept log_txns row is past its purge horizon',
      ['queue'],
      'max',
    ).collectLabeled(() => [...this.lag].map(([queue, l]) => [{ queue }, l.purgeLagSeconds]));
    m.gauge('queen_retention_oldest_retained_age_seconds', 'Age of the oldest retained segment', ['queue'], 'max').collectLabeled(() =>
      [...this.lag].map(([queue, l]) => [{ queue }, l.oldestRetainedAgeSeconds]),
    );
    // Consumer lag rides on the leader's pass: one broker reads it, so a sum
    // over brokers is not double-counted, and a scrape costs no query.
    m.gauge(
      'queen_consumer_lag_messages',
      'Retained messages a consumer group has not yet passed, per queue (leader, each pass)',
      ['queue', 'consumer_group'],
      'max',
    ).collectLabeled(() => this.groupLag.map((l) => [{ queue: l.queue, consumer_group: l.group }, l.lagMessages]));
    m.gauge(
      'queen_consumer_partitions_behind',
      'Partitions where a consumer group has messages left to read (leader, each pass)',
      ['queue', 'consumer_group'],
      'max',
    ).collectLabeled(() => this.groupLag.map((l) => [{ queue: l.queue, consumer_group: l.group }, l.partitionsBehind]));
  }

  get isLeader(): boolean {
    return this.leaderState;
  }

  protected async onStart(): Promise<void> {
    this.loop.start(0);
  }

  protected async onStop(): Promise<void> {
    await this.loop.halt();
    await this.vacuum.stop();
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
      peakConcurrentSteps: 0,
      failedSteps: 0,
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
        this.groupLag = [];
        return sum;
      }
      sum.leader = true;
      if (!this.fenced) {
        // No step session of an earlier leader may be left (it would hold the fence shared).
        const r = await client.query('SELECT pg_try_advisory_lock($1::bigint) AS ok', [RETENTION_FENCE_KEY.toString()]);
        if (r.rows[0].ok !== true) {
          this.log.info("retention leader waits for the previous leader's step sessions to end");
          return sum;
        }
        await client.query('SELECT pg_advisory_unlock($1::bigint)', [RETENTION_FENCE_KEY.toString()]);
        this.fenced = true;
      }
      await this.runSteps(client, sum);
      if (!this.loop.stopping) this.lag = new Map((await retentionOverview(client)).map((o) => [o.queue, o]));
      if (!this.loop.stopping) this.groupLag = await consumerLag(client);
      this.passes.inc();
      this.lastPassSeconds.set((Date.now() - started) / 1000);
      return sum;
    } catch (err) {
      // A lost session has lost the lock too: start over as a follower.
      await this.dropSession();
      throw err;
    }
  }

  /**
   * The steps of one pass: `concurrency` workers, one step session each, take
   * partitions from a PartitionQueue that the leader session fills a page at
   * a time. Returns when every listed partition is done (or stop() began);
   * throws the first error that ends the pass, after every worker returned,
   * so no step is in flight when the caller drops the sessions.
   */
  private async runSteps(leader: pg.Client, sum: PassSummary): Promise<void> {
    const queue = new PartitionQueue();
    let after = 0;
    let listed = false;
    let fetching: Promise<void> | undefined;
    let fatal: { error: unknown } | undefined;
    const refill = (): Promise<void> =>
      (fetching ??= (async () => {
        try {
          const page = await retentionCandidates(leader, after, this.opts.pageSize ?? 500);
          queue.add(page.ids);
          if (page.lastId === null) listed = true;
          else after = page.lastId;
        } finally {
          fetching = undefined;
        }
      })());
    await this.openStepSessions(leader);
    const worker = async (slot: number): Promise<void> => {
      try {
        for (;;) {
          const session = this.workers[slot];
          // No session: it failed earlier in this pass; the others carry on and the next pass reopens it.
          if (this.loop.stopping || fatal || !session) return;
          const pid = queue.take();
          if (pid === undefined) {
            // Nothing queued: list the next page, or finish (a partition still in
            // flight elsewhere is re-queued and taken by the worker stepping it).
            if (listed) return;
            await refill();
            continue;
          }
          let more = false;
          try {
            this.opts.onStepBegin?.(pid);
            this.inFlightSteps++;
            sum.peakConcurrentSteps = Math.max(sum.peakConcurrentSteps, this.inFlightSteps);
            const t0 = performance.now();
            try {
              const r = await retentionStep(session, pid, this.opts.batchRows, this.opts.batchBytes ?? DEFAULTS.retentionBatchBytes);
              const ms = performance.now() - t0;
              if (r) {
                this.account(sum, r, ms);
                this.opts.onStep?.(pid, r, ms);
                more = r.more;
              }
            } finally {
              this.inFlightSteps--;
            }
          } catch (err) {
            if (!(err instanceof QueenError && err.retriable)) throw err;
            // A retriable step failure (a deadlock victim, a dropped step session):
            // logged here, once; the pass goes on and this partition waits for the
            // next pass. The session is closed in case it was what failed.
            sum.failedSteps++;
            this.stepFailures.inc();
            this.log.warn({ err: err.message, partitionId: pid }, 'retention step failed; the partition is retried at the next pass');
            await this.closeStepSession(slot);
          } finally {
            queue.done(pid, more);
          }
        }
      } catch (err) {
        fatal ??= { error: err };
      }
    };
    await Promise.all(Array.from({ length: this.concurrency }, (_, slot) => worker(slot)));
    if (fatal) throw fatal.error;
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
    // The removed rows' space is reusable only once vacuumed (LogVacuum says why the
    // leader does it). Kicked per step, not per pass: a pass that drains a backlog
    // can last minutes, and the dead space must not wait for its end. LogVacuum
    // runs at most one at a time, at most once per its interval.
    if ((r.segmentsRemoved > 0 || r.txnsRowsRemoved > 0) && !this.loop.stopping) this.vacuum.kick();
  }

  private async session(): Promise<pg.Client> {
    if (this.client) return this.client;
    const client = new pg.Client({ connectionString: this.opts.connectionString, application_name: 'queen-retention' });
    // A dropped connection surfaces as a failed query; without a listener the 'error' event would crash the process.
    client.on('error', () => undefined);
    await client.connect();
    try {
      await setUpSession(client);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    this.client = client;
    return client;
  }

  /**
   * Opens the step sessions that are not open (all of them at the first pass
   * of a leadership, or after a step failure closed one). Each takes the fence
   * key shared, THEN the leader session must still answer: it held the leader
   * lock at that answer, so a later leader's fence try (which comes after it
   * won the lock) finds these sessions' shares and waits for them to end.
   */
  private async openStepSessions(leader: pg.Client): Promise<void> {
    const opening: Promise<void>[] = [];
    for (let slot = 0; slot < this.concurrency; slot++) {
      if (this.workers[slot]) continue;
      opening.push(
        (async () => {
          const c = new pg.Client({ connectionString: this.opts.connectionString, application_name: 'queen-retention-step' });
          c.on('error', () => undefined);
          this.workers[slot] = c; // closed by dropSession() if anything below fails
          await c.connect();
          await setUpSession(c);
          const r = await c.query('SELECT pg_try_advisory_lock_shared($1::bigint) AS ok', [RETENTION_FENCE_KEY.toString()]);
          if (r.rows[0].ok !== true) throw new QueenError('a retention step session could not take the fence key');
        })(),
      );
    }
    if (opening.length === 0) return;
    const outcomes = await Promise.allSettled(opening);
    const failed = outcomes.find((o) => o.status === 'rejected');
    // Not retriable within the pass: the pass fails (logged once by the loop) and the leader starts over.
    if (failed) throw new QueenError(`opening retention step sessions: ${(failed.reason as Error).message}`, { cause: failed.reason });
    await leader.query('SELECT 1');
  }

  private async closeStepSession(slot: number): Promise<void> {
    const c = this.workers[slot];
    this.workers[slot] = undefined;
    if (c) await c.end().catch(() => undefined);
  }

  private async dropSession(): Promise<void> {
    // Step sessions first: they only ever run while the leader session lives.
    await Promise.all(this.workers.map((_, slot) => this.closeStepSession(slot)));
    this.workers = [];
    this.fenced = false;
    const c = this.client;
    this.client = undefined;
    if (this.leaderState) this.log.info('retention leadership released');
    this.leaderState = false;
    // Closing the session releases the advisory lock.
    if (c) await c.end().catch(() => undefined);
  }
}
