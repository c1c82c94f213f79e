import type { EachBatchPayload, KafkaMessage } from 'kafkajs';
import type { HaltedPartitions } from './haltedPartitions.js';
import type { IngressMetrics } from './ingressMetrics.js';
import type { KafkaIngressOptions } from './ingressOptions.js';
import { PartitionLane, type LaneChunk } from './partitionLane.js';
import type { ConsumerSupervisor } from './supervisor.js';

/** One chunk of a fetched batch, waiting in its lane. */
export interface QueuedChunk extends LaneChunk {
  payload: EachBatchPayload;
  messages: KafkaMessage[];
  bytes: number;
  /** Its entry in batchStarts (stuck detection). */
  fetched: Fetched;
  fetchedAt: bigint;
}

/** When a chunk was fetched, and its partition ("topic\x1fpartition"): a halted partition's chunks do not count as stuck. */
export interface Fetched {
  at: number;
  key: string;
}

/** What the lanes need of the component around them. */
export interface IntakeHost {
  /** Set by stop(): no new chunk starts; in-flight chunks finish and commit. */
  draining(): boolean;
  /** One lane step: its chunks' records as one submission (chunkVerifier.ts). False = abandoned (not committed). */
  verify(chunks: QueuedChunk[]): Promise<boolean>;
}

/**
 * Fetched batches into partition lanes: kafkajs's eachBatch lands here, each
 * batch is cut into chunks of commitEvery records and queued on its Kafka
 * partition's PartitionLane, whose steps verify them in offset order.
 *
 * States: running (batches queue; `active` counts eachBatch calls running
 * plus chunks not yet settled) -> failed (`fatal` set: a pipelined chunk
 * failed non-retriably; the next eachBatch call throws, so kafkajs stops the
 * consumer and the supervisor restarts it) -> reset() to running with no
 * lanes, once the old consumer's work is idle(). While a lane is full
 * (maxRecordsQueued records) or the lanes together hold more than
 * maxQueuedBytes, a batch waits for a chunk to settle, which pauses fetching
 * for the whole consumer: memory stays bounded. A halted partition's batches
 * neither queue nor wait. draining (stop()) ends every wait and queues
 * nothing more.
 */
export class BatchIntake {
  /** eachBatch calls running plus chunks still waiting for their verdicts; stop and restart wait for 0. */
  private active = 0;
  /** Start time of each chunk waiting for its verdicts (stuck detection). */
  private readonly batchStarts = new Set<Fetched>();
  /** The verification pipeline of each Kafka partition, by "topic\x1fpartition" (see handleBatch). */
  private lanes = new Map<string, PartitionLane<QueuedChunk>>();
  /** A non-retriable failure of a pipelined chunk: the consumer must restart from its commits. */
  private fatal: Error | undefined;
  private idleWaiters: (() => void)[] = [];
  /** Batches waiting for room in a lane. */
  private settleWaiters: (() => void)[] = [];
  /** Payload bytes of chunks in lanes, not yet settled. */
  private queuedBytes = 0;

  constructor(
    private readonly host: IntakeHost,
    private readonly opts: KafkaIngressOptions,
    private readonly halted: HaltedPartitions,
    private readonly supervisor: ConsumerSupervisor,
    private readonly m: IngressMetrics,
  ) {}

  /** Start time of the oldest chunk waiting for its verdicts, halted partitions aside (the supervisor's stuck detection). */
  activeBatchSince(): number | undefined {
    let oldest: number | undefined;
    // A halted partition's chunks wait by design; readiness names the halt instead.
    for (const b of this.batchStarts) if (!this.halted.has(b.key) && (oldest === undefined || b.at < oldest)) oldest = b.at;
    return oldest;
  }

  /** After a restart, once idle(): no lanes, no failure; the new consumer starts from the commits. */
  reset(): void {
    this.lanes = new Map();
    this.fatal = undefined;
  }

  /**
   * One fetched batch of one Kafka partition. Its chunks join the partition's
   * lane and the batch returns at once, so kafkajs fetches again while
   * PostgreSQL works: kafkajs fetches only after every batch of its last
   * fetch returned, and waiting here for verdicts made each fetch wait for
   * the slowest partition's push (measured: half of record->commit latency).
   *
   * A lane runs its submissions (one chunk, or the chunks that queued
   * together: PartitionLane) strictly one after another in offset order, each
   * only after the one before it got every verdict and was advanced for
   * commit; a submission that does not get there (shutdown, a seek, a halt,
   * a non-retriable failure) breaks the lane and no later chunk of it is
   * pushed or committed. So pushes of one partition reach the log in offset
   * order (a retried submission is retried before anything after it is
   * submitted), and commits still never pass a record without a verdict.
   * resolveOffset() only moves kafkajs's fetch position (commits are
   * explicit, autoCommit is off); records fetched past a broken lane are
   * fetched again from the committed offset by whoever consumes the
   * partition next. A full lane (maxRecordsQueued) or too many queued bytes
   * makes this batch wait, which pauses fetching: memory stays bounded.
   */
  async handleBatch(payload: EachBatchPayload): Promise<void> {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- kafkajs builds these payload functions as closures; none uses this
    const { batch, heartbeat, isRunning, isStale, resolveOffset } = payload;
    // A pipelined chunk failed non-retriably: make kafkajs stop this consumer too (the supervisor restarts it).
    this.throwIfFailed();
    if (batch.messages.length === 0 || this.host.draining()) return;
    const key = `${batch.topic}\x1f${batch.partition}`;
    if (this.halted.has(key)) return;
    this.active++;
    this.supervisor.progress();
    // Heartbeat while this batch waits for room in its lane.
    const beat = setInterval(() => void heartbeat().catch(() => undefined), Math.max(500, (this.opts.heartbeatIntervalMs ?? 3_000) / 2));
    try {
      let lane = this.lanes.get(key);
      if (lane?.broken) {
        // Only a seek leaves a running consumer fetching after a broken lane: start over from here once the old lane is quiet.
        await lane.quiet();
        lane = undefined;
      }
      if (!lane) {
        lane = this.newLane();
        this.lanes.set(key, lane);
      }
      const depth = this.opts.maxRecordsQueued ?? 4 * (this.opts.commitEvery ?? 5000);
      const maxBytes = this.opts.maxQueuedBytes ?? 64 * 1024 * 1024;
      const chunk = this.opts.commitEvery ?? 5000;
      for (let i = 0; i < batch.messages.length; i += chunk) {
        if (this.mustWait(lane, key, depth, maxBytes)) {
          this.m.laneWaits?.inc();
          // A partition halting meanwhile wakes this wait (haltedPartitions.ts), so a halted lane never holds up fetching.
          while (this.mustWait(lane, key, depth, maxBytes)) await this.chunkSettled();
        }
        this.throwIfFailed();
        if (this.host.draining() || !isRunning() || isStale() || lane.broken || this.halted.has(key)) return;
        const messages = batch.messages.slice(i, i + chunk);
        this.enqueue(lane, payload, messages);
        resolveOffset(messages[messages.length - 1]!.offset);
      }
    } finally {
      clearInterval(beat);
      this.release();
    }
  }

  /** A partition's lane: its steps verify chunks (chunkVerifier.ts) and settle their accounting. */
  private newLane(): PartitionLane<QueuedChunk> {
    return new PartitionLane<QueuedChunk>(
      this.opts.commitEvery ?? 5000,
      (chunks) => this.host.verify(chunks),
      (chunks) => {
        for (const c of chunks) {
          this.batchStarts.delete(c.fetched);
          this.queuedBytes -= c.bytes;
          this.release();
        }
        this.wakeSettleWaiters();
      },
    );
  }

  /** Appends one chunk to its partition's lane (see handleBatch). */
  private enqueue(lane: PartitionLane<QueuedChunk>, payload: EachBatchPayload, messages: KafkaMessage[]): void {
    const fetched = { at: Date.now(), key: `${payload.batch.topic}\x1f${payload.batch.partition}` };
    let bytes = 0;
    for (const m of messages) bytes += m.value?.length ?? 0;
    this.batchStarts.add(fetched);
    this.active++;
    this.queuedBytes += bytes;
    lane.push({ payload, messages, bytes, fetched, fetchedAt: process.hrtime.bigint() });
  }

  /** A batch waits for room: its lane is full, or the lanes together hold too many bytes (one chunk per lane always fits). */
  private mustWait(lane: PartitionLane<QueuedChunk>, key: string, depth: number, maxBytes: number): boolean {
    return (
      !this.host.draining() &&
      !this.fatal &&
      !this.halted.has(key) &&
      (lane.pendingRecords >= depth || (lane.pending > 0 && this.queuedBytes > maxBytes))
    );
  }

  private throwIfFailed(): void {
    if (this.fatal) throw this.fatal;
  }

  /** A chunk failed non-retriably (a bug: bad input is answered per item): restart the consumer from its commits. */
  failed(err: Error): void {
    if (this.fatal) return;
    this.fatal = err;
    this.supervisor.fail(err);
  }

  /** Wakes every batch waiting for room in a lane; each re-checks whether it may go on. */
  wakeSettleWaiters(): void {
    const waiters = this.settleWaiters;
    this.settleWaiters = [];
    for (const w of waiters) w();
  }

  /** Resolves when any chunk settles (or stop() begins). */
  private chunkSettled(): Promise<void> {
    return new Promise((resolve) => this.settleWaiters.push(resolve));
  }

  /** Ends one unit of `active` work; wakes whoever waits for none. */
  private release(): void {
    if (--this.active > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /** Resolves when no eachBatch call runs and no chunk waits for its verdicts. */
  idle(): Promise<void> {
    return this.active === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
