import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import { claimDeadLetter, deadLetterExists, type DeadLetter } from '../engine/deadLetters.js';
import { ackOptimistic, applyAcks, type AckItem, type AckOutcome } from '../engine/acks.js';
import type { LogEngine } from '../engine/logEngine.js';
import { EMPTY_POP, popOnce, SegmentCache, type PopOutcome, type PopRequest } from '../engine/pop.js';
import { toDatabaseError } from '../engine/sqlstate.js';
import type { LogWriter, PushItem, PushResult } from '../engine/writer.js';
import { PartitionDirectory } from '../engine/partitionDirectory.js';
import type { Logger } from '../telemetry/logger.js';
import type { Counter, Histogram, MetricsRegistry } from '../telemetry/metrics.js';
import { Component } from '../util/lifecycle.js';
import { LeaseIndex } from './leaseIndex.js';
import { recordPopSpan } from './popSpan.js';
import { PopWaiters } from './waiters.js';
import { WakeBus } from './wakeBus.js';

export interface ReadPathOptions {
  /** For the cross-broker LISTEN connection; undefined = in-process wake-ups only. */
  connectionString?: string | undefined;
  metrics: MetricsRegistry;
  logger?: Logger | undefined;
  /**
   * Safety net of a long poll: it re-checks this often even without a wake-up
   * (an expired lease elsewhere, a missed cross-broker NOTIFY). Pushes and
   * released messages and ended leases wake it at once; this is not how pushes are seen.
   */
  recheckMs?: number | undefined;
  /** Segments of at most this many frames travel inline with a pop. */
  inlineMaxFrames?: number | undefined;
  /** Decoded-segment cache budget (bytes). */
  segmentCacheBytes?: number | undefined;
  /** Offsets of live leases whose spans acks resolve in the broker (LeaseIndex); 0 = always through SQL. */
  leaseSpanOffsets?: number | undefined;
}

export const READ_DEFAULTS = { recheckMs: 1_000, inlineMaxFrames: 2_000, segmentCacheBytes: 64 << 20, leaseSpanOffsets: 500_000 } as const;

export interface TransactionResult {
  pushes: PushResult[];
  acks: AckOutcome[];
}

/** Ack results that leave the transaction able to commit. */
const TXN_ACK_OK = new Set(['acked', 'released', 'dead_lettered']);

/**
 * The read side: leased pop with long poll, acks, transactions (acks and
 * pushes in one PostgreSQL transaction) and lease extension.
 *
 * States: Component lifecycle. start() starts the wake bus (LISTEN); stop()
 * answers every pending long poll at once (empty) and closes it. It uses the
 * engine's pool and must be stopped before the engine.
 */
export class ReadPath extends Component {
  readonly waiters = new PopWaiters();
  readonly leases: LeaseIndex;
  readonly bus: WakeBus;
  private readonly segments: SegmentCache;
  private readonly recheckMs: number;
  private readonly inlineMax: number;
  private readonly pops: Counter;
  private readonly popped: Counter;
  private readonly acks: Counter;
  private readonly ackRetries: Counter;
  private readonly redeliveries: Counter;
  private readonly skips: Counter;
  private readonly popDuration: Histogram;
  private readonly closing = new AbortController();

  constructor(
    private readonly engine: LogEngine,
    private readonly writer: LogWriter,
    opts: ReadPathOptions,
  ) {
    super('ReadPath');
    this.bus = new WakeBus(engine, this.waiters, opts.connectionString, opts.metrics, opts.logger);
    this.segments = new SegmentCache(opts.segmentCacheBytes ?? READ_DEFAULTS.segmentCacheBytes);
    this.leases = new LeaseIndex(opts.leaseSpanOffsets ?? READ_DEFAULTS.leaseSpanOffsets);
    this.recheckMs = opts.recheckMs ?? READ_DEFAULTS.recheckMs;
    this.inlineMax = opts.inlineMaxFrames ?? READ_DEFAULTS.inlineMaxFrames;
    const m = opts.metrics;
    this.pops = m.counter('queen_pop_requests_total', 'Pop requests by outcome (messages, empty)', 'outcome');
    this.popped = m.counter('queen_popped_messages_total', 'Messages delivered by pops');
    this.acks = m.counter('queen_acks_total', 'Acked items by result', 'result');
    this.ackRetries = m.counter(
      'queen_ack_locked_retries_total',
      'Ack requests that were answered under the cursor lock after the optimistic ack gave way, by why (conflict, dead_letter)',
      'reason',
    );
    this.redeliveries = m.counter('queen_lease_expiries_total', 'Expired leases whose span a pop took over (redelivery)');
    this.skips = m.counter(
      'queen_cursor_log_start_skips_total',
      'Offsets a cursor skipped because retention removed them (below log_start)',
    );
    this.popDuration = m.histogram('queen_pop_duration_seconds', 'Pop request duration, long-poll wait included, by outcome', {
      labelKeys: ['outcome'],
    });
    m.gauge('queen_pop_waiters', 'Long polls waiting now').collect(() => this.waiters.size);
  }

  protected async onStart(): Promise<void> {
    await this.bus.start();
  }

  protected async onStop(): Promise<void> {
    this.closing.abort();
    this.waiters.wakeAll();
    await this.bus.stop();
  }

  /**
   * Pops; with waitMs > 0 it long-polls until messages arrive or the time is
   * up (then EMPTY_POP). Wake-ups are event-driven (see WakeBus).
   */
  async pop(req: PopRequest, waitMs: number, signal?: AbortSignal): Promise<PopOutcome> {
    this.assertRunning();
    const started = Date.now();
    const deadline = started + waitMs;
    const timer = this.popDuration.startTimer();
    let outcome = 'error';
    const aborts = signal ? AbortSignal.any([signal, this.closing.signal]) : this.closing.signal;
    // Offsets skipped below log_start by every pop of this call, so the
    // answer says so even when the skip itself found nothing to deliver and
    // the call went on to look again (docs/retention.md).
    let skipped = 0;
    try {
      for (;;) {
        // Taken before the query: a wake during it is not lost (waiters.ts).
        const ticket = this.waiters.ticket(req.queue);
        let r: PopOutcome;
        try {
          r = await popOnce(this.engine.pool, req, this.segments, this.inlineMax);
        } catch (err) {
          ticket.cancel();
          throw err;
        }
        if (r.partitionId !== null) this.bus.remember(r.partitionId, req.queue);
        if (r.skipped > 0) this.skips.inc(r.skipped);
        skipped += r.skipped;
        if (r.leaseSpan && r.leaseId !== null) this.leases.put(r.leaseId, r.leaseSpan);
        if (r.messages.length > 0) {
          ticket.cancel();
          recordPopSpan(req, r, started);
          if (r.redelivered) this.redeliveries.inc();
          this.pops.inc(1, 'messages');
          outcome = 'messages';
          this.popped.inc(r.messages.length);
          return { ...r, skipped, leaseSpan: undefined };
        }
        // A skip to log_start that found nothing left: look again at once.
        if (r.skipped > 0 || r.leaseId !== null) {
          ticket.cancel();
          continue;
        }
        const left = deadline - Date.now();
        if (left <= 0 || aborts.aborted) {
          ticket.cancel();
          this.pops.inc(1, 'empty');
          outcome = 'empty';
          return skipped > 0 ? { ...EMPTY_POP, skipped } : EMPTY_POP;
        }
        // A live lease over pending messages expires at nextExpiry: look again then.
        const untilExpiry = r.nextExpiry ? Math.max(1, r.nextExpiry.getTime() - Date.now() + 5) : Infinity;
        await ticket.wait(Math.min(left, this.recheckMs, untilExpiry), aborts);
      }
    } finally {
      timer({ outcome });
    }
  }

  /** POST /ack and /ack/batch: one transaction, per-item answers. */
  async ack(items: readonly AckItem[]): Promise<AckOutcome[]> {
    this.assertRunning();
    const client = await this.connect();
    let freed: number[] = [];
    let outcomes: AckOutcome[];
    try {
      // Two round trips when no cursor changes under it; else (or when it
      // dead-letters) the same acks again under the cursor locks.
      let r = await ackOptimistic(client, items, this.leases.get);
      if (typeof r === 'string') {
        this.ackRetries.inc(1, r);
        await client.query('BEGIN');
        r = await applyAcks(client, items, this.leases.get);
        await client.query('COMMIT');
      }
      outcomes = r.outcomes;
      freed = r.freedPartitions;
      for (const l of r.endedLeases) this.leases.drop(l);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release(isBroken(err));
      throw toDatabaseError(err, 'acking');
    }
    client.release();
    this.countAcks(outcomes);
    // A lease this ack ended opens its partition to the group's other consumers.
    if (freed.length > 0) void this.bus.appended(freed);
    return outcomes;
  }

  /**
   * Acks and pushes in one PostgreSQL transaction. Lock order: the
   * log_partitions rows of every partition it pushes to or acks on, ascending
   * id, before anything else (the push function then re-takes locks it holds);
   * cursor rows after, in the acks. Any ack that cannot settle (lease_expired,
   * not_found, already_acked), any push item that fails validation, or a
   * required lease that is not live rolls everything back (ConflictError or
   * ValidationError): nothing is half applied.
   */
  async transaction(pushes: readonly PushItem[], acks: readonly AckItem[], requiredLeases: readonly string[]): Promise<TransactionResult> {
    this.assertRunning();
    pushes.forEach((p, i) => {
      try {
        this.writer.accept(p, i);
      } catch (err) {
        if (err instanceof ValidationError) throw new ValidationError(`push item ${i}: ${err.message}`, `operations.push[${i}]`);
        throw err;
      }
    });
    // Provisioning is its own short transaction (as for /push), before ours.
    const infos =
      pushes.length > 0
        ? await this.writer.directory.resolve(pushes.map((p) => ({ queue: p.queue, partition: p.partition ?? 'Default' })))
        : new Map();
    const pushPids = [...infos.values()].map((i) => i.partitionId as number);

    const client = await this.connect();
    let result: TransactionResult;
    let freed: number[] = [];
    try {
      await client.query('BEGIN');
      const ackPids = acks.filter((a) => a.partitionId !== undefined).map((a) => a.partitionId!);
      const leaseIds = [...new Set([...acks.filter((a) => a.partitionId === undefined).map((a) => a.leaseId!), ...requiredLeases])];
      if (leaseIds.length > 0) {
        const r = await client.query(
          'SELECT lease_id::text AS lease_id, partition_id FROM queen.log_cursors WHERE lease_id = ANY($1::uuid[]) AND lease_expires_at > clock_timestamp()',
          [leaseIds],
        );
        const live = new Set(r.rows.map((row) => row.lease_id as string));
        const dead = requiredLeases.filter((l) => !live.has(l));
        if (dead.length > 0) throw new ConflictError(`required lease(s) not live: ${dead.join(', ')}`);
        for (const row of r.rows) ackPids.push(row.partition_id as number);
      }
      const union = [...new Set([...pushPids, ...ackPids])].sort((a, b) => a - b);
      if (union.length > 0)
        await client.query('SELECT id FROM queen.log_partitions WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE', [union]);
      const pushed = pushes.length > 0 ? await this.writer.push(pushes, client) : [];
      const failed = pushed.findIndex((p) => p.status === 'failed');
      if (failed >= 0) throw new ValidationError(`push item ${failed}: ${pushed[failed]!.error ?? 'failed'}`, `operations.push[${failed}]`);
      const a = await applyAcks(client, acks, this.leases.get);
      const bad = a.outcomes.findIndex((o) => !TXN_ACK_OK.has(o.result));
      if (bad >= 0) throw new ConflictError(`ack ${bad} answered ${a.outcomes[bad]!.result}; the transaction was rolled back`, a.outcomes);
      await client.query('COMMIT');
      result = { pushes: pushed, acks: a.outcomes };
      freed = a.freedPartitions;
      for (const l of a.endedLeases) this.leases.drop(l);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release(isBroken(err));
      if (err instanceof ConflictError || err instanceof ValidationError) throw err;
      throw toDatabaseError(err, 'running a transaction');
    }
    client.release();
    this.countAcks(result.acks);
    const appended = new Set<number>(freed);
    result.pushes.forEach((p) => {
      if (p.status === 'queued') appended.add(infos.get(PartitionDirectory.key(p.queue, p.partition))!.partitionId);
    });
    if (appended.size > 0) this.engine.announceAppended([...appended]);
    return result;
  }

  /**
   * Pushes a copy of a dead letter back to its queue and partition (every
   * group sees it, as a new message) and marks the dead letter requeued, in
   * one transaction. Its transactionId is the original one + "#requeue-<id>",
   * so the copy is distinguishable and a repeated requeue is refused (409).
   */
  async requeue(id: number): Promise<{ deadLetter: DeadLetter; push: PushResult }> {
    this.assertRunning();
    const client = await this.connect();
    let out: { deadLetter: DeadLetter; push: PushResult };
    try {
      await client.query('BEGIN');
      const d = await claimDeadLetter(client, id);
      if (!d) {
        if (await deadLetterExists(this.engine.pool, id)) throw new ConflictError(`dead letter ${id} was requeued already`);
        throw new NotFoundError(`no dead letter with id ${id}`);
      }
      if (!d.payload) throw new ConflictError(`dead letter ${id} has no stored payload`);
      await client.query('SELECT id FROM queen.log_partitions WHERE id = $1 FOR UPDATE', [d.partitionId]);
      const [push] = await this.writer.push(
        [
          {
            queue: d.queue,
            partition: d.partition,
            transactionId: `${d.transactionId ?? d.messageId}#requeue-${d.id}`,
            payload: d.payload,
            traceContext: d.traceContext ?? undefined,
          },
        ],
        client,
      );
      if (push!.status === 'failed') throw new ValidationError(`requeue of dead letter ${id} failed: ${push!.error}`);
      await client.query('COMMIT');
      out = { deadLetter: d, push: push! };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release(isBroken(err));
      if (err instanceof ConflictError || err instanceof NotFoundError || err instanceof ValidationError) throw err;
      throw toDatabaseError(err, 'requeueing a dead letter');
    }
    client.release();
    if (out.push.status === 'queued') this.engine.announceAppended([out.deadLetter.partitionId]);
    return out;
  }

  /** Extends a live lease to now + seconds; null when the lease id is not (or no longer) held. */
  async extend(leaseId: string, seconds: number): Promise<{ leaseId: string; leaseExpiresAt: Date } | null> {
    this.assertRunning();
    try {
      const r = await this.engine.pool.query(
        'UPDATE queen.log_cursors SET lease_expires_at = clock_timestamp() + make_interval(secs => $2) WHERE lease_id = $1::uuid RETURNING lease_expires_at',
        [leaseId, seconds],
      );
      return r.rowCount === 0 ? null : { leaseId, leaseExpiresAt: r.rows[0].lease_expires_at };
    } catch (err) {
      throw toDatabaseError(err, 'extending a lease');
    }
  }

  /** One counter update per result, not per item: a 1 000-item ack cost ~1 us per item in label handling. */
  private countAcks(outcomes: readonly AckOutcome[]): void {
    const by = new Map<string, number>();
    for (const o of outcomes) by.set(o.result, (by.get(o.result) ?? 0) + 1);
    for (const [result, n] of by) this.acks.inc(n, result);
  }

  private async connect() {
    try {
      return await this.engine.pool.connect();
    } catch (err) {
      throw toDatabaseError(err, 'connecting to PostgreSQL');
    }
  }
}

/** A client whose connection failed must not go back to the pool. */
function isBroken(err: unknown): boolean {
  const e = toDatabaseError(err, '');
  return e.retriable;
}
