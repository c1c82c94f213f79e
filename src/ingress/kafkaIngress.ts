import { Kafka, logLevel, type Consumer, type EachBatchPayload, type KafkaConfig, type KafkaMessage } from 'kafkajs';
import type { TopicMapping } from '../config.js';
import { ConfigError, isRetriable, LifecycleError } from '../errors.js';
import type { PushItem, PushResult } from '../engine/writer.js';
import type { Fusion } from '../fusion/fusion.js';
import type { Logger } from '../telemetry/logger.js';
import { messageVerdicts, type MetricsRegistry } from '../telemetry/metrics.js';
import { backoffMs, pause } from '../util/backoff.js';
import { Component } from '../util/lifecycle.js';
import { DeadLetterProducer, DeadLetterWriteError, type DeadLetter } from './deadLetter.js';
import { inSpan, parentOrLinks, recording, spanContextOf, SpanKind } from '../telemetry/tracing.js';
import { trace, type SpanContext } from '@opentelemetry/api';
import { mapRecord, type MappingOptions, type MissingIdPolicy } from './recordMapping.js';
import { checkPartitionName } from '../engine/limits.js';
import { OffsetCommitter, type PartitionOffset } from './offsetCommitter.js';
import { PartitionLane, type LaneChunk } from './partitionLane.js';
import { registerCodecs, undecodableReason } from './codecs.js';
import type { SchemaRegistryDecoder } from './schemaRegistry.js';
import { ConsumerSupervisor, type HaltedPartition, type IngressStatus } from './supervisor.js';
import { kafkajsLogCreator } from './kafkaLog.js';

export type { IngressStatus } from './supervisor.js';

export interface KafkaIngressOptions {
  brokers: string[];
  clientId?: string;
  /** TLS and SASL for managed Kafka (kafkajs's own option shapes; built by config.ts). */
  ssl?: KafkaConfig['ssl'];
  sasl?: KafkaConfig['sasl'];
  groupId: string;
  topics: TopicMapping[];
  dlqSuffix: string;
  /**
   * What a record that cannot be stored does: 'all' (default) dead-letters it
   * and moves on; 'none' halts its partition (not committed, fetching paused,
   * readiness false, logged and counted) until an operator intervenes.
   */
  errorsTolerance?: 'all' | 'none';
  /**
   * What a dead-letter write that fails does (Connect's errors.tolerance,
   * applied to the dead-letter write itself): 'none' (default) halts the
   * record's partition visibly from the first failure and retries with
   * backoff, resuming by itself once the write succeeds; 'all' skips the
   * record (logged and counted, queen_ingress_dead_letter_skips_total) and
   * commits past it, as Connect does when its dead-letter produce fails.
   */
  deadLetterErrorsTolerance?: 'all' | 'none';
  /** A record without a transactionId: 'dlq' (default), 'fail' (halt its partition) or 'offset' (topic/partition/offset); a topic's own mapping may say otherwise. */
  missingId?: MissingIdPolicy;
  /** Decodes Confluent-framed values (QUEEN_SCHEMA_REGISTRY_URL); without it only framed JSON Schema values are read. */
  schemaRegistry?: SchemaRegistryDecoder;
  /** A batch waiting longer than this for its verdicts marks the consumer stuck (readiness, metric). */
  stuckAfterMs?: number;
  /** kafkajs's own retries of a failing fetch/batch before the consumer crashes (default 10). */
  consumerRetries?: number;
  /** Longest wait between two restarts of a crashed consumer. */
  restartBackoffMaxMs?: number;
  /** Kafka partitions whose batches are processed at once (their items fuse into shared bundles). */
  partitionsConsumedConcurrently?: number;
  sessionTimeoutMs?: number;
  heartbeatIntervalMs?: number;
  /** Where a group with no committed offset starts. Default true: an ingress must not skip data. */
  fromBeginning?: boolean;
  maxBytesPerPartition?: number;
  /** Longest a fetch waits for data; kafkajs also waits this out before a disconnect or rebalance. */
  maxWaitTimeInMs?: number;
  /** Records per commit within a batch. */
  commitEvery?: number;
  /**
   * Records of one partition fetched ahead of its verdicts (default 4 x
   * commitEvery); a full lane pauses fetching for every partition of the
   * consumer. Counted in records, not chunks: a lane's waiting chunks go
   * together in its next submission, so at low rates a dozen small chunks
   * cost what one does, and counting them as full chunks paused fetching
   * for 13-20 % of the time at 16 k records/s.
   */
  maxRecordsQueued?: number;
  /** Payload bytes of all lanes together above which fetching pauses (default 64 MiB). */
  maxQueuedBytes?: number;
  /** Observer called after each chunk's commit was sent (tests, benchmarks, latency metrics). */
  onCommitted?: (chunk: CommittedChunk) => void;
}

/** What a committed chunk held: each record's verdict, in offset order. */
export interface CommittedChunk {
  topic: string;
  partition: number;
  records: { offset: string; timestamp: string; status: 'queued' | 'duplicate' | 'dead_lettered' | 'skipped' }[];
  /** Whether Kafka accepted the commit (false: a rebalance refused it; the records will be redelivered). */
  committed: boolean;
  /** Stages of the chunk, Date.now() each: cut from its fetched batch, started by its lane, all verdicts in, commit acknowledged. */
  fetchedAtMs: number;
  startedAtMs: number;
  verdictsAtMs: number;
  committedAtMs: number;
}

/** One chunk of a fetched batch, waiting in its lane. */
interface QueuedChunk extends LaneChunk {
  payload: EachBatchPayload;
  messages: KafkaMessage[];
  bytes: number;
  /** Its entry in batchStarts (stuck detection). */
  fetched: Fetched;
  fetchedAt: bigint;
}

/** When a chunk was fetched, and its partition ("topic\x1fpartition"): a halted partition's chunks do not count as stuck. */
interface Fetched {
  at: number;
  key: string;
}

/** The chunks one lane step verifies together: their records as one submission, committed as one. */
interface Submission {
  topic: string;
  partition: number;
  messages: KafkaMessage[];
  isRunning: () => boolean;
  isStale: () => boolean;
  /** Of its oldest chunk: what the commit latency is measured from. */
  fetchedAt: bigint;
  fetchedAtMs: number;
}

/**
 * Kafka -> fusion -> PostgreSQL, committing offsets only behind verdicts.
 *
 * Each fetched batch of one Kafka partition is cut into chunks that wait in
 * the partition's lane (handleBatch) while kafkajs fetches on. A lane takes
 * its chunks in offset order, one submission at a time (the chunks that
 * queued while the one before was in flight go together): map every record,
 * submit the good ones to the fusion layer, dead-letter the rest and every
 * item the engine answers `failed`, and only when every record of the
 * submission has a PostgreSQL verdict (queued/duplicate) or an acknowledged
 * dead-letter write, commit `lastOffset + 1` (all partitions' commits share
 * one request).
 * Nothing is committed past a record without one. So a crash, a kill -9 or
 * a rebalance can only cause redelivery, and a redelivered record carries
 * the same transactionId, hence comes back as a `duplicate` with the
 * original id: never a loss, never a second copy.
 *
 * Retriable failures (PostgreSQL restarting, a dead-letter write failing) are
 * retried with backoff inside the chunk, before anything after it in its lane
 * is submitted, until they succeed or the consumer stops; an abandoned chunk
 * is simply not committed, and neither is anything after it in its lane. A
 * failing dead-letter write also halts its partition visibly from the first
 * failure (readiness, queen_ingress_halted_partitions, fetching of that
 * partition paused) until it succeeds (writeDeadLetters).
 *
 * States: Component lifecycle. start() connects the dead-letter producer and
 * the consumer, subscribes and runs; stop() stops fetching, lets in-flight
 * chunks finish or abandons them at the next retry point (queued chunks do
 * not start), commits what is verified, and leaves the group. While the
 * fusion layer reports pressure, or a lane is full, fetching is paused.
 */
export class KafkaIngress extends Component {
  private readonly kafka: Kafka;
  /** The current consumer; the supervisor replaces it after a crash. */
  private consumer: Consumer;
  private readonly deadLetters: DeadLetterProducer;
  private readonly queueOf: Map<string, string>;
  /** Each topic's mapping (QUEEN_INGRESS_MAPPING, the missing-id policy). */
  private readonly mappingOf: Map<string, MappingOptions>;
  private readonly supervisor: ConsumerSupervisor;
  private restarting: Promise<void> | undefined;
  private readonly abort = new AbortController();
  private paused = false;
  /** Set by stop(): no new chunk starts; in-flight chunks finish and commit. */
  private draining = false;
  /** eachBatch calls running plus chunks still waiting for their verdicts; stop and restart wait for 0. */
  private active = 0;
  /** Start time of each chunk waiting for its verdicts (stuck detection). */
  private readonly batchStarts = new Set<Fetched>();
  /** The verification pipeline of each Kafka partition, by "topic\x1fpartition" (see handleBatch). */
  private lanes = new Map<string, PartitionLane<QueuedChunk>>();
  /** A non-retriable failure of a pipelined chunk: the consumer must restart from its commits. */
  private fatal: Error | undefined;
  /**
   * Halted partitions, by "topic\x1fpartition": a bad record under
   * errorsTolerance 'none' or missingId 'fail' (until a restart), or a
   * dead-letter write that keeps failing (until it succeeds).
   */
  private readonly halted = new Map<string, HaltedPartition>();
  private idleWaiters: (() => void)[] = [];
  /** Batches waiting for room in a lane. */
  private settleWaiters: (() => void)[] = [];
  /** Payload bytes of chunks in lanes, not yet settled. */
  private queuedBytes = 0;
  /** The current consumer's committer: commits leave the critical path, all partitions in one request. */
  private committer: OffsetCommitter;
  private readonly onPressure = () => this.setPaused(true);
  private readonly onRelief = () => this.setPaused(false);
  private readonly records;
  private readonly verdicts;
  private readonly commits;
  private readonly retries;
  private readonly dead;
  private readonly deadFailures;
  private readonly deadSkips;
  private readonly pauses;
  private readonly laneWaits;
  private readonly messages;
  private readonly commitLatency;

  constructor(
    private readonly fusion: Fusion,
    private readonly opts: KafkaIngressOptions,
    private readonly log: Logger,
    metrics?: MetricsRegistry,
  ) {
    super('KafkaIngress');
    registerCodecs();
    this.kafka = new Kafka({
      clientId: opts.clientId ?? 'queen-ingress',
      brokers: opts.brokers,
      ssl: opts.ssl,
      sasl: opts.sasl,
      logLevel: logLevel.WARN,
      logCreator: kafkajsLogCreator(this.log),
      retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 5_000 },
    });
    this.consumer = this.newConsumer();
    this.committer = this.newCommitter();
    this.deadLetters = new DeadLetterProducer(
      this.kafka,
      opts.dlqSuffix,
      new Map(opts.topics.filter((t) => t.dlq).map((t) => [t.topic, t.dlq!])),
      opts.groupId,
    );
    this.queueOf = new Map(opts.topics.map((t) => [t.topic, t.queue]));
    this.mappingOf = new Map(
      opts.topics.map((t) => {
        const p = t.mapping?.partition;
        if (p && 'constant' in p) {
          try {
            checkPartitionName(p.constant);
          } catch (err) {
            throw new ConfigError(`QUEEN_INGRESS_MAPPING["${t.topic}"].partition: constant:${p.constant}: ${(err as Error).message}`);
          }
        }
        const m: MappingOptions = { missingId: t.mapping?.missingId ?? opts.missingId ?? 'dlq', registry: opts.schemaRegistry };
        if (t.mapping) {
          m.transactionId = t.mapping.transactionId;
          m.partition = t.mapping.partition;
        }
        return [t.topic, m];
      }),
    );
    this.supervisor = new ConsumerSupervisor(
      {
        restart: () => this.restartConsumer(),
        activeBatchSince: () => {
          let oldest: number | undefined;
          // A halted partition's chunks wait by design; readiness names the halt instead.
          for (const b of this.batchStarts) if (!this.halted.has(b.key) && (oldest === undefined || b.at < oldest)) oldest = b.at;
          return oldest;
        },
        halted: () => [...this.halted.values()],
      },
      {
        stuckAfterMs: opts.stuckAfterMs ?? 120_000,
        sessionTimeoutMs: opts.sessionTimeoutMs ?? 30_000,
        backoffMaxMs: opts.restartBackoffMaxMs ?? 30_000,
      },
      this.log,
      metrics,
    );
    this.records = metrics?.counter('queen_ingress_records_total', 'Kafka records processed by outcome', 'outcome');
    this.verdicts = metrics?.counter('queen_ingress_commits_total', 'Chunks of Kafka records fully verified and committed');
    this.commits = metrics?.counter(
      'queen_ingress_commit_failures_total',
      'Offset commits refused (rebalance); the records will be redelivered as duplicates',
    );
    this.retries = metrics?.counter('queen_ingress_retries_total', 'Batch attempts retried after a retriable failure');
    this.dead = metrics?.counter('queen_ingress_dead_letters_total', 'Records written to a dead-letter topic');
    this.deadFailures = metrics?.counter(
      'queen_ingress_dead_letter_failures_total',
      'Dead-letter writes that failed (each halts its partition, or skips its records under QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE=all)',
    );
    this.deadSkips = metrics?.counter(
      'queen_ingress_dead_letter_skips_total',
      'Records skipped because their dead-letter write failed (QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE=all); committed past, in neither the log nor the dead-letter topic',
    );
    this.pauses = metrics?.counter(
      'queen_ingress_pauses_total',
      'Times fetching was paused because the fusion layer was over its in-flight byte budget',
    );
    this.laneWaits = metrics?.counter(
      'queen_ingress_lane_waits_total',
      "Times a fetched batch waited for room in its partition's lane (or under the lanes' byte budget); fetching pauses for the whole consumer meanwhile",
    );
    this.messages = metrics && messageVerdicts(metrics);
    this.commitLatency = metrics?.histogram(
      'queen_ingress_record_commit_seconds',
      'From a chunk of records being fetched to the broker acknowledging its offset commit',
    );
    // 1 while the supervisor's consumer is a live group member (its consumer is replaced on restart, so read the supervisor).
    metrics
      // min over a pod's workers: 0 while any worker's consumer is not a member (the alert on == 0 still fires).
      ?.gauge('queen_kafka_consumer_up', 'Whether the Kafka consumer is a live member of its group (1) or not (0)', [], 'min')
      .collect(() => (this.state === 'running' && this.status().member ? 1 : 0));
  }

  /** Read-only supervisor state: readiness, metrics and diagnostics read it. */
  status(): IngressStatus {
    return this.supervisor.status();
  }

  private newConsumer(): Consumer {
    const opts = this.opts;
    return this.kafka.consumer({
      groupId: opts.groupId,
      sessionTimeout: opts.sessionTimeoutMs ?? 30_000,
      heartbeatInterval: opts.heartbeatIntervalMs ?? 3_000,
      maxBytesPerPartition: opts.maxBytesPerPartition ?? 1024 * 1024,
      maxWaitTimeInMs: opts.maxWaitTimeInMs ?? 250,
      allowAutoTopicCreation: true,
      // kafkajs never restarts on its own: every crash goes to the supervisor,
      // which logs it once, counts it and restarts with backoff.
      retry: { retries: opts.consumerRetries ?? 10, initialRetryTime: 200, maxRetryTime: 5_000, restartOnFailure: async () => false },
    });
  }

  protected async onStart(): Promise<void> {
    await this.deadLetters.start();
    await this.ensureDeadLetterTopics();
    await this.runConsumer();
    this.fusion.events.on('pressure', this.onPressure);
    this.fusion.events.on('relief', this.onRelief);
    this.log.info({ topics: this.opts.topics, group: this.opts.groupId }, 'consuming');
  }

  /** Connects the current consumer, subscribes, runs; the supervisor watches it from here on. */
  private async runConsumer(): Promise<void> {
    this.supervisor.watch(this.consumer);
    await this.consumer.connect();
    for (const t of this.opts.topics) {
      // A topic that does not exist yet is auto-created by the first metadata
      // request, which answers with a retriable error until it has leaders.
      await this.retryStartup(`subscribing to ${t.topic}`, () =>
        this.consumer.subscribe({ topic: t.topic, fromBeginning: this.opts.fromBeginning ?? true }),
      );
    }
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.opts.partitionsConsumedConcurrently ?? 16,
      eachBatch: (payload) => this.handleBatch(payload),
    });
    // Partitions halted before a restart stay halted: the pause is re-applied to the new consumer.
    for (const h of this.halted.values()) this.consumer.pause([{ topic: h.topic, partitions: [h.partition] }]);
    if (this.paused) this.consumer.pause(this.opts.topics.map((t) => ({ topic: t.topic })));
  }

  /**
   * Called by the supervisor after a crash: a fresh consumer object (kafkajs's
   * crashed one has left the group and dropped its runner), the same group,
   * resuming from the committed offsets. Throws when it cannot start; the
   * supervisor then retries with backoff.
   */
  private restartConsumer(): Promise<void> {
    if (this.state !== 'running') return Promise.resolve();
    const restart = (async () => {
      await this.consumer.disconnect().catch(() => undefined);
      // The old consumer's chunks finish or give up (its isRunning() is now false); none commits through the new one.
      await this.idle();
      await this.committer.flush();
      this.lanes = new Map();
      this.fatal = undefined;
      this.consumer = this.newConsumer();
      this.committer = this.newCommitter();
      await this.runConsumer();
    })();
    // stop() waits for a restart in progress, so it disconnects the consumer that restart left running.
    this.restarting = restart.catch(() => undefined);
    return restart;
  }

  protected async onStop(): Promise<void> {
    this.fusion.events.off('pressure', this.onPressure);
    this.fusion.events.off('relief', this.onRelief);
    // kafkajs drops explicit commits silently once its runner is stopping,
    // so the drain happens first, while commits still go through: no new
    // chunk starts, in-flight chunks finish and commit, retry loops give up
    // (uncommitted, hence redelivered later). Only then leave the group.
    this.draining = true;
    this.abort.abort();
    this.supervisor.stop();
    await this.restarting;
    // A crashed consumer has no group to pause (kafkajs throws "Consumer group was not initialized").
    if (this.supervisor.status().member) this.consumer.pause(this.opts.topics.map((t) => ({ topic: t.topic })));
    // Batches waiting for room see `draining` and return.
    this.wakeSettleWaiters();
    await this.idle();
    await this.committer.flush();
    // disconnect() stops fetching and leaves the group, so partitions move at
    // once rather than after a session timeout.
    await this.consumer.disconnect();
    await this.deadLetters.stop();
  }

  /** Creates missing dead-letter topics (retrying what a just-started broker answers retriably). */
  private async ensureDeadLetterTopics(): Promise<void> {
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      await this.retryStartup('creating dead-letter topics', async () => {
        const existing = new Set(await admin.listTopics());
        const wanted = this.opts.topics.map((t) => this.deadLetters.topicFor(t.topic)).filter((t) => !existing.has(t));
        if (wanted.length > 0) await admin.createTopics({ topics: wanted.map((topic) => ({ topic })), waitForLeaders: true });
      });
    } finally {
      await admin.disconnect();
    }
    // Each dead-letter topic's max.message.bytes: a dead letter is cut to fit it.
    await this.deadLetters.refreshLimits(this.opts.topics.map((t) => this.deadLetters.topicFor(t.topic)));
  }

  /**
   * Start-up steps against a broker that may have just started (or just
   * auto-created a topic) answer retriable errors for a moment, e.g.
   * UNKNOWN_TOPIC_OR_PARTITION while leaders are elected. Those are retried
   * with backoff for a bounded number of attempts; anything else fails start.
   */
  private async retryStartup<T>(what: string, op: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await op();
      } catch (err) {
        const retriable =
          (err as { retriable?: boolean }).retriable === true || (err as { name?: string }).name === 'KafkaJSNumberOfRetriesExceeded';
        if (!retriable || attempt >= 15 || this.abort.signal.aborted) throw err;
        this.log.info({ err: (err as Error).message, attempt }, `${what}: broker not ready; retrying`);
        await pause(backoffMs(attempt, 200, 3_000), this.abort.signal);
      }
    }
  }

  private setPaused(paused: boolean): void {
    if (this.paused === paused || this.state !== 'running') return;
    this.paused = paused;
    const topics = this.opts.topics.map((t) => ({ topic: t.topic }));
    if (!this.supervisor.status().member) return; // applied when the restarted consumer runs
    if (paused) {
      this.consumer.pause(topics);
      this.pauses?.inc();
    } else {
      this.consumer.resume(topics);
      // Resuming a topic must not resume a halted partition.
      for (const h of this.halted.values()) this.consumer.pause([{ topic: h.topic, partitions: [h.partition] }]);
    }
    this.log.info({ paused }, paused ? 'fusion under pressure: fetching paused' : 'fusion relieved: fetching resumed');
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
  private async handleBatch(payload: EachBatchPayload): Promise<void> {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- kafkajs builds these payload functions as closures; none uses this
    const { batch, heartbeat, isRunning, isStale, resolveOffset } = payload;
    // A pipelined chunk failed non-retriably: make kafkajs stop this consumer too (the supervisor restarts it).
    this.throwIfFailed();
    if (batch.messages.length === 0 || this.draining) return;
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
          this.laneWaits?.inc();
          // A partition halting meanwhile wakes this wait (haltPartition), so a halted lane never holds up fetching.
          while (this.mustWait(lane, key, depth, maxBytes)) await this.chunkSettled();
        }
        this.throwIfFailed();
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- stop() sets it while this batch waits for room
        if (this.draining || !isRunning() || isStale() || lane.broken || this.halted.has(key)) return;
        const messages = batch.messages.slice(i, i + chunk);
        this.enqueue(lane, payload, messages);
        resolveOffset(messages[messages.length - 1]!.offset);
      }
    } finally {
      clearInterval(beat);
      this.release();
    }
  }

  /** A partition's lane: its steps verify chunks (handleChunk) and settle their accounting. */
  private newLane(): PartitionLane<QueuedChunk> {
    return new PartitionLane<QueuedChunk>(
      this.opts.commitEvery ?? 5000,
      (chunks) => this.verify(chunks),
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

  /** One lane step: its chunks' records as one submission, in a consumer span. False = abandoned (not committed). */
  private async verify(chunks: QueuedChunk[]): Promise<boolean> {
    const first = chunks[0]!;
    const messages = chunks.length === 1 ? first.messages : chunks.flatMap((c) => c.messages);
    const sub: Submission = {
      topic: first.payload.batch.topic,
      partition: first.payload.batch.partition,
      messages,
      isRunning: () => chunks.every((c) => c.payload.isRunning()),
      isStale: () => chunks.some((c) => c.payload.isStale()),
      fetchedAt: first.fetchedAt,
      fetchedAtMs: first.fetched.at,
    };
    try {
      const { parent, links } = parentOrLinks(producerContexts(messages));
      return await inSpan(
        `process ${sub.topic}`,
        { kind: SpanKind.CONSUMER, parent, links, attributes: this.chunkAttributes(sub.topic, sub.partition, messages) },
        () => this.handleChunk(sub),
      );
    } catch (err) {
      this.failed(err as Error);
      return false;
    }
  }

  /** A batch waits for room: its lane is full, or the lanes together hold too many bytes (one chunk per lane always fits). */
  private mustWait(lane: PartitionLane<QueuedChunk>, key: string, depth: number, maxBytes: number): boolean {
    return (
      !this.draining &&
      !this.fatal &&
      !this.halted.has(key) &&
      (lane.pendingRecords >= depth || (lane.pending > 0 && this.queuedBytes > maxBytes))
    );
  }

  private throwIfFailed(): void {
    if (this.fatal) throw this.fatal;
  }

  /** A chunk failed non-retriably (a bug: bad input is answered per item): restart the consumer from its commits. */
  private failed(err: Error): void {
    if (this.fatal) return;
    this.fatal = err;
    this.supervisor.fail(err);
  }

  /** Wakes every batch waiting for room in a lane; each re-checks whether it may go on. */
  private wakeSettleWaiters(): void {
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
  private idle(): Promise<void> {
    return this.active === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** One submission of a lane: verdicts for all, then advance its commit. False = abandoned (not committed). */
  private async handleChunk(sub: Submission): Promise<boolean> {
    const startedAtMs = Date.now();
    const { messages, isRunning, isStale, fetchedAt, fetchedAtMs } = sub;
    const batch = { topic: sub.topic, partition: sub.partition };
    if (this.draining || !isRunning() || isStale()) return false;
    const queue = this.queueOf.get(batch.topic)!;
    const letters: DeadLetter[] = [];
    const items: PushItem[] = [];
    const itemRecords: KafkaMessage[] = [];
    const mapping = this.mappingOf.get(batch.topic)!;
    /** The first record that must halt the partition instead of being dead-lettered. */
    let haltAt: DeadLetter | undefined;
    const mustHalt = (l: DeadLetter, halt: boolean) => {
      if ((halt || this.opts.errorsTolerance === 'none') && (!haltAt || BigInt(l.record.offset) < BigInt(haltAt.record.offset))) haltAt = l;
    };
    // Framed values' schemas not cached yet (a loop, no await, when there are none); an unreachable registry halts the partition until it answers.
    const registry = this.opts.schemaRegistry;
    const toFetch = registry ? registry.firstToFetch(messages) : -1;
    if (registry && toFetch >= 0) {
      const { topic, partition } = batch;
      const offset = messages[toFetch]!.offset;
      const fetched = await registry.fetchUntilDone(topic, messages, {
        isRunning,
        isStale,
        signal: this.abort.signal,
        halt: (reason) => this.haltPartition({ topic, partition, offset, reason, at: Date.now(), cause: 'schema-registry' }),
        resume: () => this.resumePartition(topic, partition, 'written'),
      });
      if (!fetched) return false;
    }
    for (const m of messages) {
      const undecodable = undecodableReason(m);
      if (undecodable) {
        const l: DeadLetter = {
          topic: batch.topic,
          partition: batch.partition,
          record: m,
          reason: undecodable,
          errorClass: 'UndecodableBatchError',
          stage: 'KAFKA_CONSUME',
          className: 'queen.ingress.Codecs',
        };
        letters.push(l);
        mustHalt(l, false);
        continue;
      }
      const mapped = mapRecord(batch.topic, queue, batch.partition, m, mapping);
      if (mapped.ok) {
        items.push(mapped.item);
        itemRecords.push(m);
      } else {
        const l: DeadLetter = {
          topic: batch.topic,
          partition: batch.partition,
          record: m,
          reason: mapped.reason,
          errorClass: 'ValidationError',
          stage: mapped.stage,
          className: 'queen.ingress.RecordMapping',
        };
        letters.push(l);
        mustHalt(l, mapped.halt);
      }
    }

    if (haltAt) {
      // Halting: store nothing past the first halting record (records before it are stored, not committed: duplicates later).
      const firstBad = BigInt(haltAt.record.offset);
      const keep = itemRecords.findIndex((m) => BigInt(m.offset) > firstBad);
      if (keep >= 0) {
        items.length = keep;
        itemRecords.length = keep;
      }
    }
    const results = await this.untilDone(() => this.fusion.submit(items), isRunning, isStale, 'pushing a batch');
    if (!results) return false; // abandoned: not committed, will be redelivered
    let queued = 0;
    let duplicates = 0;
    // Each record's verdict, only for an observer (tests, benchmarks): a Map
    // entry and an object per record that the commit itself does not need.
    const observed = this.opts.onCommitted !== undefined;
    const statusOf = new Map<string, 'queued' | 'duplicate' | 'skipped'>();
    results.forEach((r: PushResult, i) => {
      if (r.status === 'failed') {
        const l: DeadLetter = {
          topic: batch.topic,
          partition: batch.partition,
          record: itemRecords[i]!,
          reason: r.error ?? 'rejected by the log',
          errorClass: 'RejectedByLog',
          stage: 'TASK_PUT',
          className: 'queen.engine.LogWriter',
        };
        letters.push(l);
        mustHalt(l, false);
      } else {
        if (observed) statusOf.set(itemRecords[i]!.offset, r.status);
        if (r.status === 'queued') queued++;
        else duplicates++;
      }
    });
    if (haltAt) {
      // Halt instead of dead-lettering: nothing of this chunk is committed
      // (verdicts already stored come back as duplicates after the fix).
      this.haltPartition({
        topic: batch.topic,
        partition: batch.partition,
        offset: haltAt.record.offset,
        reason: haltAt.reason,
        at: Date.now(),
        cause: 'bad-record',
      });
      return false;
    }
    let skipped = 0;
    if (letters.length > 0) {
      const outcome = await this.writeDeadLetters(batch, letters, isRunning, isStale);
      if (!outcome) return false;
      skipped = outcome.skipped.length;
      for (const l of outcome.skipped) if (observed) statusOf.set(l.record.offset, 'skipped');
      const written = letters.length - skipped;
      if (written > 0) {
        this.dead?.inc(written);
        this.log.warn(
          { topic: batch.topic, partition: batch.partition, count: written, first: letters[0]!.reason },
          'records dead-lettered',
        );
      }
    }
    this.records?.inc(queued, 'queued');
    this.records?.inc(duplicates, 'duplicate');
    this.records?.inc(letters.length - skipped, 'dead_lettered');
    this.records?.inc(skipped, 'skipped');
    this.messages?.inc(queued, { source: 'kafka', status: 'queued' });
    this.messages?.inc(duplicates, { source: 'kafka', status: 'duplicate' });
    this.messages?.inc(letters.length, { source: 'kafka', status: 'failed' });
    const span = trace.getActiveSpan();
    if (recording(span))
      span.setAttributes({ 'queen.verdict.queued': queued, 'queen.verdict.duplicate': duplicates, 'queen.verdict.failed': letters.length });

    // Every record of the chunk now has a verdict or an acknowledged dead letter.
    this.supervisor.chunkDone();
    const verdictsAtMs = Date.now();
    const last = messages[messages.length - 1]!.offset;
    const records = observed
      ? messages.map((m) => ({
          offset: m.offset,
          timestamp: m.timestamp,
          status: statusOf.get(m.offset) ?? ('dead_lettered' as const),
        }))
      : [];
    void this.committer.advance(batch.topic, batch.partition, (BigInt(last) + 1n).toString()).then((committed) => {
      this.verdicts?.inc();
      if (committed) this.commitLatency?.observe(Number(process.hrtime.bigint() - fetchedAt) / 1e9);
      this.opts.onCommitted?.({
        topic: batch.topic,
        partition: batch.partition,
        records,
        committed,
        fetchedAtMs,
        startedAtMs,
        verdictsAtMs,
        committedAtMs: Date.now(),
      });
    });
    return true;
  }

  /**
   * Stops one partition visibly (log, metric, readiness), never silently: a
   * bad record under errorsTolerance 'none' or missingId 'fail' (until a
   * restart), or a dead-letter write that keeps failing (until it succeeds,
   * resumePartition). Fetching of the partition pauses; the others go on.
   */
  private haltPartition(h: HaltedPartition): void {
    const key = `${h.topic}\x1f${h.partition}`;
    const first = !this.halted.has(key);
    this.halted.set(key, h);
    if (!first) return;
    try {
      this.consumer.pause([{ topic: h.topic, partitions: [h.partition] }]);
    } catch {
      // No group right now (a crash): runConsumer re-applies the pause.
    }
    // A batch of this partition waiting for room in its lane must not hold up fetching for the others.
    this.wakeSettleWaiters();
    const { topic, partition, offset, reason } = h;
    if (h.cause === 'schema-registry')
      this.log.error(
        { topic, partition, offset, reason },
        'partition halted: the schema registry does not answer; retrying with backoff, resumes by itself once it does',
      );
    else if (h.cause === 'dead-letter-write')
      this.log.error(
        { topic, partition, offset, reason },
        'partition halted: a dead-letter write failed; retrying with backoff, resumes by itself once it succeeds (QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE=all skips such records instead)',
      );
    else
      this.log.error(
        { topic, partition, offset, reason },
        'partition halted: a record cannot be stored and the settings say halt (QUEEN_INGRESS_ERRORS_TOLERANCE=none or QUEEN_INGRESS_MISSING_ID=fail); not committed; fix the cause or move the group offset past it, then restart',
      );
  }

  /** Ends a dead-letter halt: the write went through, or the chunk was abandoned (a restart or rebalance reads it again). */
  private resumePartition(topic: string, partition: number, why: 'written' | 'abandoned'): void {
    const key = `${topic}\x1f${partition}`;
    const cause = this.halted.get(key)?.cause;
    if (cause !== 'dead-letter-write' && cause !== 'schema-registry') return;
    this.halted.delete(key);
    if (!this.paused && this.supervisor.status().member) {
      try {
        this.consumer.resume([{ topic, partitions: [partition] }]);
      } catch {
        // No group right now: the restarted consumer starts unpaused.
      }
    }
    if (why === 'written')
      this.log.info(
        { topic, partition },
        cause === 'schema-registry' ? 'schema registry answered; partition resumed' : 'dead-letter write succeeded; partition resumed',
      );
  }

  /**
   * Writes a submission's dead letters. A failed write (after kafkajs's own
   * retries) re-reads the dead-letter topics' limits (a raised
   * max.message.bytes is seen at once), then, under deadLetterErrorsTolerance
   * 'none', halts the partition visibly from this first failure and retries
   * with backoff until the write succeeds (the partition resumes) or the chunk
   * is abandoned (shutdown, rebalance, restart: nothing committed, so a
   * restarted service reads the record again and halts again at once).
   * Under 'all' the unwritten records are skipped: each is logged and counted.
   * Undefined: abandoned.
   */
  private async writeDeadLetters(
    batch: { topic: string; partition: number },
    letters: DeadLetter[],
    isRunning: () => boolean,
    isStale: () => boolean,
  ): Promise<{ skipped: DeadLetter[] } | undefined> {
    let pending = letters;
    let since: string | undefined;
    for (let attempt = 0; ; attempt++) {
      if (this.draining || !isRunning() || isStale() || this.abort.signal.aborted) {
        this.resumePartition(batch.topic, batch.partition, 'abandoned');
        return undefined;
      }
      try {
        await this.deadLetters.send(pending);
        this.resumePartition(batch.topic, batch.partition, 'written');
        return { skipped: [] };
      } catch (err) {
        if (err instanceof LifecycleError) {
          this.resumePartition(batch.topic, batch.partition, 'abandoned');
          return undefined;
        }
        if (err instanceof DeadLetterWriteError) pending = err.remaining;
        const dlqTopic = err instanceof DeadLetterWriteError ? err.dlqTopic : this.deadLetters.topicFor(batch.topic);
        this.deadFailures?.inc();
        const limitBefore = this.deadLetters.maxMessageBytes(dlqTopic);
        await this.deadLetters.refreshLimits([dlqTopic]);
        const limitChanged = this.deadLetters.maxMessageBytes(dlqTopic) !== limitBefore;
        const message = (err as Error).message;
        if (this.opts.deadLetterErrorsTolerance === 'all') {
          if (attempt === 0 && limitChanged) continue; // cut again to the limit now in force, once
          for (const l of pending)
            this.log.error(
              { topic: l.topic, partition: l.partition, offset: l.record.offset, reason: l.reason, err: message },
              'record skipped: its dead-letter write failed (QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE=all); it is in neither the log nor the dead-letter topic',
            );
          this.deadSkips?.inc(pending.length);
          return { skipped: pending };
        }
        since ??= new Date().toISOString();
        const first = pending[0]!;
        this.haltPartition({
          topic: batch.topic,
          partition: batch.partition,
          offset: first.record.offset,
          reason: `dead-letter write to ${dlqTopic} failing since ${since} (${attempt + 1} attempts, retrying with backoff): ${message}; the record was being dead-lettered because: ${first.reason}`,
          at: Date.now(),
          cause: 'dead-letter-write',
        });
        if (attempt > 0 && attempt % 10 === 0)
          this.log.warn(
            { topic: batch.topic, partition: batch.partition, attempt, err: message },
            'dead-letter write still failing; retrying',
          );
        await pause(backoffMs(attempt, 500, 10_000), this.abort.signal);
      }
    }
  }

  /** Messaging semantic conventions for a chunk's consumer span; the per-record ones only for a single record. */
  private chunkAttributes(topic: string, partition: number, messages: KafkaMessage[]): Record<string, string | number> {
    const a: Record<string, string | number> = {
      'messaging.system': 'kafka',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': topic,
      'messaging.destination.partition.id': String(partition),
      'messaging.consumer.group.name': this.opts.groupId,
      'messaging.batch.message_count': messages.length,
      'messaging.kafka.offset': Number(messages[0]!.offset),
    };
    if (messages.length === 1 && messages[0]!.key) a['messaging.kafka.message.key'] = messages[0]!.key.toString();
    return a;
  }

  /** A committer bound to the current consumer: a chunk of a replaced consumer can never commit through its successor. */
  private newCommitter(): OffsetCommitter {
    const consumer = this.consumer;
    return new OffsetCommitter((offsets) => this.commit(consumer, offsets));
  }

  /** Commits each partition's next offset to read; false when a rebalance (or a stopped consumer) refused it. */
  private async commit(consumer: Consumer, offsets: PartitionOffset[]): Promise<boolean> {
    try {
      await consumer.commitOffsets(offsets);
      return true;
    } catch (err) {
      // A rebalance took the partitions: their new owner re-reads from the
      // last committed offsets and gets duplicates for what we verified. No loss.
      this.commits?.inc();
      this.log.info({ offsets, err: (err as Error).message }, 'offset commit refused; records will be redelivered');
      return false;
    }
  }

  /**
   * Runs `op` until it succeeds, retrying retriable failures with backoff.
   * Returns undefined when the consumer stops or the batch goes stale first.
   * A non-retriable failure is a bug here (bad input is answered per item),
   * so it is rethrown and kafkajs restarts the consumer from the last commit.
   */
  private async untilDone<T>(op: () => Promise<T>, isRunning: () => boolean, isStale: () => boolean, what: string): Promise<T | undefined> {
    for (let attempt = 0; ; attempt++) {
      if (!isRunning() || isStale()) return undefined;
      try {
        return await op();
      } catch (err) {
        // The fusion layer stopping under us means shutdown: abandon, uncommitted.
        if (err instanceof LifecycleError) return undefined;
        if (!isRetriable(err)) throw err;
        this.retries?.inc();
        const wait = backoffMs(attempt, 200, 5_000);
        if (attempt === 0 || attempt % 10 === 0) this.log.warn({ err: (err as Error).message, attempt, wait }, `${what} failed; retrying`);
        await pause(wait, this.abort.signal);
        if (this.abort.signal.aborted) return undefined;
      }
    }
  }
}

/** The producers' span contexts carried in the records' traceparent headers, in offset order. */
function producerContexts(messages: KafkaMessage[]): SpanContext[] {
  const out: SpanContext[] = [];
  for (const m of messages) {
    const tp = m.headers?.traceparent;
    if (!tp) continue;
    const ts = m.headers?.tracestate;
    const sc = spanContextOf(ts ? `${tp.toString()};${ts.toString()}` : tp.toString());
    if (sc) out.push(sc);
  }
  return out;
}
