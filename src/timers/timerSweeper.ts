import type pg from 'pg';
import { appendFired, claimDueTimers, recordFireFailure, type ClaimedTimer, type FireOutcome } from '../engine/timerStore.js';
import { toDatabaseError } from '../engine/sqlstate.js';
import { silentLogger, type Logger } from '../telemetry/logger.js';
import type { Counter, MetricsRegistry } from '../telemetry/metrics.js';
import { Component } from '../util/lifecycle.js';
import { SerialLoop } from '../util/serialLoop.js';

export interface TimerSweeperOptions {
  pool: pg.Pool;
  /** Pause after a sweep that found fewer due timers than a full batch. */
  pollMs: number;
  /** Most timers one fire transaction claims. */
  batch: number;
  metrics: MetricsRegistry;
  logger?: Logger;
  /** false: no background loop, only sweepOnce() fires (tests). Default true. */
  loop?: boolean;
  /**
   * Test hook: runs inside the fire transaction after the claim and the
   * append, before COMMIT (a test process is killed here).
   */
  beforeCommit?: (claimed: readonly ClaimedTimer[]) => Promise<void>;
}

/**
 * Fires due timers (docs/timers.md). One fire is ONE transaction:
 *
 *   BEGIN; claim due rows FOR UPDATE SKIP LOCKED and delete them;
 *   lock their partitions (ascending id); push their frames with the
 *   promised ids and transactionIds; COMMIT.
 *
 * If it commits, the rows are gone and the messages are in the log; if it
 * rolls back (an error, a killed broker, a lost connection), neither: the
 * rows are due again and the next sweep, here or on another broker, fires
 * them. Sweepers on several brokers never fire one row twice: the claim is
 * the row lock and SKIP LOCKED passes over rows another sweeper holds.
 *
 * States (besides the Component lifecycle): idle-waiting (pollMs) and
 * sweeping; a full batch sweeps again at once, so a burst drains at the
 * speed of the database rather than of the poll interval.
 */
export class TimerSweeper extends Component {
  private readonly loop: SerialLoop<FireOutcome[]>;
  private readonly log: Logger;
  private readonly fired: Counter;
  private readonly fires: Counter;
  private readonly failures: Counter;

  constructor(private readonly opts: TimerSweeperOptions) {
    super('TimerSweeper');
    this.log = opts.logger ?? silentLogger;
    this.fired = opts.metrics.counter(
      'queen_timers_fired_total',
      'Timers fired (staging row deleted and message appended in one transaction)',
    );
    this.fires = opts.metrics.counter('queen_timer_fire_transactions_total', 'Fire transactions committed');
    this.failures = opts.metrics.counter(
      'queen_timer_fire_failures_total',
      'Fire transactions that rolled back (their timers fire at a later sweep)',
    );
    this.loop = new SerialLoop(
      () => this.fire(),
      (o) => {
        if (!o.ok) {
          this.log.warn({ err: (o.error as Error).message }, 'timer fire failed; the timers stay due and fire at a later sweep');
          return this.opts.pollMs;
        }
        // A full batch: more may be due, sweep again at once.
        return o.value.reduce((a, x) => a + x.count, 0) >= this.opts.batch ? 0 : this.opts.pollMs;
      },
    );
  }

  protected async onStart(): Promise<void> {
    if (this.opts.loop !== false) this.loop.start(0);
  }

  protected async onStop(): Promise<void> {
    await this.loop.halt();
  }

  /** One fire transaction now; returns the outcomes (empty when nothing was due). Serialised with the loop. */
  sweepOnce(): Promise<FireOutcome[]> {
    this.assertRunning();
    return this.loop.runNow();
  }

  private async fire(): Promise<FireOutcome[]> {
    const client = await this.opts.pool.connect();
    let broken = false;
    let claimed: ClaimedTimer[] = [];
    try {
      await client.query('BEGIN');
      claimed = await claimDueTimers(client, this.opts.batch);
      if (claimed.length === 0) {
        await client.query('COMMIT');
        return [];
      }
      const out = await appendFired(client, claimed);
      if (this.opts.beforeCommit) await this.opts.beforeCommit(claimed);
      await client.query('COMMIT');
      this.fires.inc();
      this.fired.inc(claimed.length);
      return out;
    } catch (err) {
      this.failures.inc();
      await client.query('ROLLBACK').catch(() => (broken = true));
      const e = toDatabaseError(err, 'firing timers');
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set by the ROLLBACK's catch callback just above
      if (claimed.length > 0 && !broken) {
        await recordFireFailure(
          this.opts.pool,
          claimed.map((c) => c.messageId),
          e.message,
        ).catch(() => undefined);
      }
      throw e;
    } finally {
      client.release(broken);
    }
  }
}
