import { Kafka, logLevel, type Consumer } from 'kafkajs';
import { matchTopicPatterns, type TopicMapping } from '../config.js';
import { ConfigError } from '../errors.js';
import type { Fusion } from '../fusion/fusion.js';
import type { Logger } from '../telemetry/logger.js';
import type { MetricsRegistry } from '../telemetry/metrics.js';
import { backoffMs, pause } from '../util/backoff.js';
import { Component } from '../util/lifecycle.js';
import { DeadLetterProducer } from './deadLetter.js';
import type { MappingOptions } from './recordMapping.js';
import { checkPartitionName } from '../engine/limits.js';
import { registerCodecs } from './codecs.js';
import { installRecordDecoder } from './recordDecoder.js';
import { ConsumerSupervisor, type IngressStatus } from './supervisor.js';
import { kafkajsLogCreator } from './kafkaLog.js';
import { BatchIntake } from './batchIntake.js';
import { ChunkVerifier } from './chunkVerifier.js';
import { HaltedPartitions } from './haltedPartitions.js';
import { ingressMetrics, type IngressMetrics } from './ingressMetrics.js';
import type { KafkaIngressOptions } from './ingressOptions.js';
import { VerdictCommits } from './verdictCommits.js';

export type { IngressStatus } from './supervisor.js';
export type { CommittedChunk, KafkaIngressOptions } from './ingressOptions.js';

/**
 * Fetch batching on the broker. Every fetch round costs the service the
 * same whatever it carries (a fetch request and response, a lane step and
 * a span per partition, a bundle push, a commit), so at moderate rates the
 * CPU per record was set by how often fetches returned: with kafkajs's
 * minBytes of 1 a fetch came back with whatever had arrived (at 20 k
 * records/s, ~120 rounds a second of ~170 records; 20-22 µs of Node CPU per
 * record against ~10 µs draining a backlog). Waiting for 64 KiB or 50 ms
 * makes the rounds ~3x larger there (~15 µs per record) and adds at most
 * 50 ms to a record's latency at low rates, less as the rate rises (64 KiB
 * of ~130-byte records arrives within 10 ms at 50 k records/s). A backlog is
 * not affected: its fetches fill at once. The same wait bounds how long
 * kafkajs waits a fetch out before it leaves or rejoins the group.
 * Measured in make bench (kafka-e2e, `CPU per record, paced 20 k rec/s`).
 */
export const FETCH_MIN_BYTES = 64 * 1024;
export const FETCH_MAX_WAIT_MS = 50;

/**
 * Kafka -> fusion -> PostgreSQL, committing offsets only behind verdicts.
 *
 * Each fetched batch of one Kafka partition is cut into chunks that wait in
 * the partition's lane (batchIntake.ts) while kafkajs fetches on. A lane takes
 * its chunks in offset order, one submission at a time (the chunks that
 * queued while the one before was in flight go together): map every record,
 * submit the good ones to the fusion layer, dead-letter the rest and every
 * item the engine answers `failed` (chunkVerifier.ts), and only when every
 * record of the submission has a PostgreSQL verdict (queued/duplicate) or an
 * acknowledged dead-letter write, commit `lastOffset + 1` (all partitions'
 * commits share one request: verdictCommits.ts, offsetCommitter.ts).
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
 * partition paused) until it succeeds (haltedPartitions.ts).
 *
 * This class runs the consumer and composes those parts. States: Component
 * lifecycle. start() connects the dead-letter producer and the consumer,
 * subscribes and runs; drain() stops fetching, lets in-flight chunks finish
 * or abandons them at the next retry point (queued chunks do not start) and
 * commits what is verified, still a group member; stop() drains (if not yet)
 * and leaves the group. Within running, the
 * consumer is one of a sequence: ConsumerSupervisor (supervisor.ts) watches
 * it and, after a crash, restartConsumer replaces it with a fresh one once
 * the old one's chunks are idle and its commits flushed. While the fusion
 * layer reports pressure (`paused`), or a lane is full, fetching is paused.
 */
export class KafkaIngress extends Component {
  private readonly kafka: Kafka;
  /** The current consumer; the supervisor replaces it after a crash. */
  private consumer: Consumer;
  private readonly deadLetters: DeadLetterProducer;
  /**
   * The topics consumed: the literal ones, then at start those the patterns
   * match (resolveTopicPatterns), then those a refresh finds (refreshTopics).
   * Only ever grows: a topic is never dropped while running.
   */
  private readonly topics: TopicMapping[];
  /** Each topic's own dead-letter topic, where it has one (the dead-letter producer reads it). */
  private readonly dlqOverrides: Map<string, string>;
  private readonly queueOf: Map<string, string>;
  /** Each topic's mapping (QUEEN_INGRESS_MAPPING, the missing-id policy). */
  private readonly mappingOf: Map<string, MappingOptions>;
  private readonly supervisor: ConsumerSupervisor;
  private restarting: Promise<void> | undefined;
  /** Matches the patterns again every topicRefreshMs while running (set only with patterns). */
  private refreshTimer: NodeJS.Timeout | undefined;
  /** The refresh in progress (at most one; stop() waits for it). */
  private refreshing: Promise<void> | undefined;
  private readonly abort = new AbortController();
  private paused = false;
  /** Set by drain() (and so by stop()): no new chunk starts; in-flight chunks finish and commit. */
  private draining = false;
  /** The drain, once begun (drain() or stop()). */
  private drained: Promise<void> | undefined;
  /**
   * Halted partitions: a bad record under errorsTolerance 'none' or
   * missingId 'fail' (until a restart), or a dead-letter write that keeps
   * failing (until it succeeds).
   */
  private readonly halted: HaltedPartitions;
  /** Fetched batches into the partitions' lanes. */
  private readonly intake: BatchIntake;
  /** The commit stage, bound to the current consumer. */
  private readonly commits: VerdictCommits;
  private readonly onPressure = () => this.setPaused(true);
  private readonly onRelief = () => this.setPaused(false);
  private readonly m: IngressMetrics;

  constructor(
    private readonly fusion: Fusion,
    private readonly opts: KafkaIngressOptions,
    private readonly log: Logger,
    metrics?: MetricsRegistry,
  ) {
    super('KafkaIngress');
    registerCodecs();
    const decoder = installRecordDecoder();
    // Only when something in this process consumed with kafkajs before the
    // first ingress was built; correct either way, just slower per record.
    if (decoder.startsWith('too late')) this.log.warn({ decoder }, "kafkajs's own record decoder stays in use");
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
    this.topics = [...opts.topics];
    this.dlqOverrides = new Map(opts.topics.filter((t) => t.dlq).map((t) => [t.topic, t.dlq!]));
    this.deadLetters = new DeadLetterProducer(this.kafka, opts.dlqSuffix, this.dlqOverrides, opts.groupId);
    this.queueOf = new Map(opts.topics.map((t) => [t.topic, t.queue]));
    this.mappingOf = new Map(opts.topics.map((t) => [t.topic, this.mappingOptions(t.topic, t.mapping)]));
    // A pattern's mappings are checked now too, not when a topic it matches turns up.
    for (const p of opts.topicPatterns ?? []) {
      if (p.mapping) this.mappingOptions(p.source, p.mapping);
      for (const [topic, m] of Object.entries(p.topicMappings ?? {})) this.mappingOptions(topic, m);
    }
    this.halted = new HaltedPartitions(
      {
        consumer: () => this.consumer,
        mayResume: () => !this.paused && this.supervisor.status().member,
        onHalted: () => this.intake.wakeSettleWaiters(),
      },
      this.log,
    );
    this.supervisor = new ConsumerSupervisor(
      {
        restart: () => this.restartConsumer(),
        activeBatchSince: () => this.intake.activeBatchSince(),
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
    this.m = ingressMetrics(metrics);
    this.commits = new VerdictCommits(this.consumer, opts, this.log, this.m);
    const verifier = new ChunkVerifier(
      {
        draining: () => this.draining,
        signal: this.abort.signal,
        failed: (err) => this.intake.failed(err),
        queueOf: (topic) => this.queueOf.get(topic)!,
        mappingOf: (topic) => this.mappingOf.get(topic)!,
      },
      fusion,
      opts,
      this.deadLetters,
      this.halted,
      this.supervisor,
      this.commits,
      this.log,
      this.m,
    );
    this.intake = new BatchIntake(
      { draining: () => this.draining, verify: (chunks) => verifier.verify(chunks) },
      opts,
      this.halted,
      this.supervisor,
      this.m,
    );
    // 1 while the supervisor's consumer is a live group member (its consumer is replaced on restart, so read the supervisor).
    metrics
      // min over a pod's workers: 0 while any worker's consumer is not a member (the alert on == 0 still fires).
      ?.gauge('queen_kafka_consumer_up', 'Whether the Kafka consumer is a live member of its group (1) or not (0)', [], 'min')
      .collect(() => (this.state === 'running' && this.status().member ? 1 : 0));
  }

  /** How one topic's records map: its QUEEN_INGRESS_MAPPING entry (`key` names it), else the default, with the missing-id policy. */
  private mappingOptions(key: string, mapping: TopicMapping['mapping']): MappingOptions {
    const p = mapping?.partition;
    if (p && 'constant' in p) {
      try {
        checkPartitionName(p.constant);
      } catch (err) {
        throw new ConfigError(`QUEEN_INGRESS_MAPPING["${key}"].partition: constant:${p.constant}: ${(err as Error).message}`);
      }
    }
    const m: MappingOptions = {
      missingId: mapping?.missingId ?? this.opts.missingId ?? 'dlq',
      registry: this.opts.schemaRegistry,
      keepOrigin: this.opts.keepOrigin ?? true,
    };
    if (mapping) {
      m.transactionId = mapping.transactionId;
      m.partition = mapping.partition;
    }
    return m;
  }

  /** The topics consumed (after start: those the patterns matched included). */
  topicNames(): string[] {
    return this.topics.map((t) => t.topic);
  }

  /** Read-only supervisor state: readiness, metrics and diagnostics read it. */
  status(): IngressStatus {
    return this.supervisor.status();
  }

  private newConsumer(): Consumer {
    const opts = this.opts;
    return this.kafka.consumer({
      // A fetch waits on the broker for FETCH_MIN_BYTES or maxWaitTimeInMs,
      // whichever comes first, unless QUEEN_KAFKA_CONSUMER sets minBytes
      // (never above its maxBytes, which it must not exceed).
      minBytes: Math.min(FETCH_MIN_BYTES, opts.consumer?.maxBytes ?? Infinity),
      // The validated pass-through first (config/consumerSettings.ts): what follows is the ingress's own and wins.
      ...opts.consumer,
      groupId: opts.groupId,
      sessionTimeout: opts.sessionTimeoutMs ?? 30_000,
      heartbeatInterval: opts.heartbeatIntervalMs ?? 3_000,
      maxBytesPerPartition: opts.maxBytesPerPartition ?? 1024 * 1024,
      maxWaitTimeInMs: opts.maxWaitTimeInMs ?? FETCH_MAX_WAIT_MS,
      allowAutoTopicCreation: true,
      // kafkajs never restarts on its own: every crash goes to the supervisor,
      // which logs it once, counts it and restarts with backoff.
      retry: { retries: opts.consumerRetries ?? 10, initialRetryTime: 200, maxRetryTime: 5_000, restartOnFailure: async () => false },
    });
  }

  protected async onStart(): Promise<void> {
    await this.deadLetters.start();
    await this.resolveTopicPatterns();
    await this.ensureDeadLetterTopics();
    await this.runConsumer();
    const refreshMs = this.opts.topicRefreshMs ?? 0;
    if ((this.opts.topicPatterns ?? []).length > 0 && refreshMs > 0) {
      this.refreshTimer = setInterval(() => this.refreshTick(), refreshMs);
      this.refreshTimer.unref();
    }
    this.fusion.events.on('pressure', this.onPressure);
    this.fusion.events.on('relief', this.onRelief);
    this.log.info({ topics: this.topics, group: this.opts.groupId }, 'consuming');
  }

  /** Connects the current consumer, subscribes, runs; the supervisor watches it from here on. */
  private async runConsumer(): Promise<void> {
    this.supervisor.watch(this.consumer);
    await this.consumer.connect();
    for (const t of this.topics) {
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
      eachBatch: (payload) => this.intake.handleBatch(payload),
    });
    // Partitions halted before a restart stay halted: the pause is re-applied to the new consumer.
    for (const h of this.halted.values()) this.consumer.pause([{ topic: h.topic, partitions: [h.partition] }]);
    if (this.paused) this.consumer.pause(this.topics.map((t) => ({ topic: t.topic })));
  }

  /**
   * Called by the supervisor after a crash: a fresh consumer object (kafkajs's
   * crashed one has left the group and dropped its runner), the same group,
   * resuming from the committed offsets. Throws when it cannot start; the
   * supervisor then retries with backoff.
   */
  private restartConsumer(): Promise<void> {
    if (this.state !== 'running') return Promise.resolve();
    // One restart at a time: a crash restart and a resubscription (refreshTopics) never interleave.
    const previous = this.restarting;
    const restart = (async () => {
      await previous;
      if (this.state !== 'running') return;
      await this.consumer.disconnect().catch(() => undefined);
      // The old consumer's chunks finish or give up (its isRunning() is now false); none commits through the new one.
      await this.intake.idle();
      await this.commits.flush();
      this.intake.reset();
      this.consumer = this.newConsumer();
      this.commits.bind(this.consumer);
      await this.runConsumer();
    })();
    // stop() waits for a restart in progress, so it disconnects the consumer that restart left running.
    this.restarting = restart.catch(() => undefined);
    return restart;
  }

  /**
   * The first half of stop(), on its own: a pod's workers all drain before
   * any leaves the group, since the first leave starts a rebalance that
   * refuses the commits of a worker still settling (docs/scaling.md,
   * "Stopping"). Afterwards nothing is fetched or started, every chunk has
   * settled and what PostgreSQL verified is committed, and the consumer is
   * still a member (its paused fetch loop keeps heartbeating). Idempotent;
   * stop() completes it and then leaves. Nothing to do unless running.
   */
  drain(): Promise<void> {
    if (this.state === 'running') this.drained ??= this.drainNow();
    return this.drained ?? Promise.resolve();
  }

  private async drainNow(): Promise<void> {
    this.fusion.events.off('pressure', this.onPressure);
    this.fusion.events.off('relief', this.onRelief);
    // kafkajs drops explicit commits silently once its runner is stopping,
    // so the drain happens first, while commits still go through: no new
    // chunk starts, in-flight chunks finish and commit, retry loops give up
    // (uncommitted, hence redelivered later).
    this.draining = true;
    this.abort.abort();
    clearInterval(this.refreshTimer);
    this.supervisor.stop();
    await this.refreshing;
    await this.restarting;
    // Not fetching any more: a drained worker may stay a member for a while
    // (until the pod's last worker drained), and its batches would only be
    // dropped unread. Every topic, so a rebalance meanwhile hands it nothing
    // to fetch either.
    try {
      this.consumer.pause(this.topics.map((t) => ({ topic: t.topic })));
    } catch {
      // A crashed consumer has no group to pause (kafkajs throws "Consumer group was not initialized").
    }
    // Batches waiting for room see `draining` and return.
    this.intake.wakeSettleWaiters();
    await this.intake.idle();
    await this.commits.flushForStop();
  }

  protected async onStop(): Promise<void> {
    await (this.drained ??= this.drainNow());
    // Only then leave the group: disconnect() stops fetching and leaves, so
    // partitions move at once rather than after a session timeout.
    await this.consumer.disconnect();
    await this.deadLetters.stop();
  }

  /**
   * Adds the topics QUEEN_INGRESS_TOPICS's patterns match among those the
   * broker lists now (matchTopicPatterns: whole names, never an internal or
   * dead-letter topic). The subscription is then a plain list of names, the
   * same on every restart of the consumer, so the partitions a group member
   * owns do not change under a running chunk. Nothing to consume at all
   * fails start, naming the patterns.
   */
  private async resolveTopicPatterns(): Promise<void> {
    const patterns = this.opts.topicPatterns ?? [];
    if (patterns.length === 0) return;
    const found = await this.newMatches(true);
    this.adopt(found);
    const later = (this.opts.topicRefreshMs ?? 0) > 0 ? 'at the next topic refresh' : 'after the next start';
    for (const p of patterns) {
      const matched = found.filter((t) => p.pattern.test(t.topic)).map((t) => t.topic);
      if (matched.length === 0)
        this.log.warn({ pattern: p.source }, `no topic matches this pattern yet; a topic created later is consumed ${later}`);
      else this.log.info({ pattern: p.source, topics: matched }, 'topic pattern matched');
    }
    if (this.topics.length === 0)
      throw new ConfigError(
        `QUEEN_INGRESS_TOPICS: no topic matches ${patterns.map((p) => p.source).join(', ')} and no topic is named: nothing to consume`,
      );
  }

  /** The topics the patterns match now that are not consumed yet (at start with start-up retries, later without). */
  private async newMatches(atStart: boolean): Promise<TopicMapping[]> {
    const admin = this.kafka.admin();
    await admin.connect();
    let names: string[];
    try {
      names = atStart
        ? await this.retryStartup('listing topics for the topic patterns', () => admin.listTopics())
        : await admin.listTopics();
    } finally {
      await admin.disconnect();
    }
    return matchTopicPatterns(names, this.opts.topicPatterns ?? [], this.topics, this.opts.dlqSuffix);
  }

  /** Makes newly matched topics known to every part that looks a topic up (queue, mapping, dead-letter topic, lag monitor). */
  private adopt(found: readonly TopicMapping[]): void {
    for (const t of found) {
      this.topics.push(t);
      this.queueOf.set(t.topic, t.queue);
      this.mappingOf.set(t.topic, this.mappingOptions(t.topic, t.mapping));
      if (t.dlq) this.dlqOverrides.set(t.topic, t.dlq);
    }
  }

  /** Running and not stopping (read after each await: a stop may have begun meanwhile). */
  private live(): boolean {
    return this.state === 'running' && !this.draining;
  }

  private refreshTick(): void {
    if (this.refreshing || !this.live()) return;
    this.refreshing = this.refreshTopics()
      .catch((err: unknown) => this.log.warn({ err: (err as Error).message }, 'topic refresh failed; trying again at the next one'))
      .finally(() => (this.refreshing = undefined));
  }

  /**
   * A topic created after start that a pattern matches: its dead-letter topic
   * is created, then the consumer drains (fetching paused, in-flight chunks
   * finish and commit behind their verdicts) and is replaced by one
   * subscribed to every topic. The group rebalances once for the leave and
   * once for the join; as after any rebalance, a record fetched but not
   * committed is redelivered and answered as a duplicate, never stored twice.
   * A consumer that is not a member now (crashed, restarting) needs nothing:
   * its restart subscribes to the grown list.
   */
  private async refreshTopics(): Promise<void> {
    const found = await this.newMatches(false);
    if (found.length === 0 || !this.live()) return;
    await this.ensureDeadLetterTopics(found.map((t) => t.topic));
    if (!this.live()) return;
    this.adopt(found);
    this.log.info({ topics: found.map((t) => t.topic) }, 'new topics match the topic patterns; resubscribing');
    if (!this.supervisor.status().member) return;
    try {
      this.consumer.pause(this.topics.map((t) => ({ topic: t.topic })));
      await this.intake.idle();
      await this.commits.flush();
      await this.restartConsumer();
    } catch (err) {
      // As a crash: the supervisor restarts with backoff, and that consumer subscribes to every topic.
      this.supervisor.fail(err as Error);
    }
  }

  /** Creates missing dead-letter topics (retrying what a just-started broker answers retriably). */
  private async ensureDeadLetterTopics(of: readonly string[] = this.topics.map((t) => t.topic)): Promise<void> {
    const topics = of.map((t) => this.deadLetters.topicFor(t));
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      await this.retryStartup('creating dead-letter topics', async () => {
        const existing = new Set(await admin.listTopics());
        const wanted = topics.filter((t) => !existing.has(t));
        if (wanted.length > 0) await admin.createTopics({ topics: wanted.map((topic) => ({ topic })), waitForLeaders: true });
      });
    } finally {
      await admin.disconnect();
    }
    // Each dead-letter topic's max.message.bytes: a dead letter is cut to fit it.
    await this.deadLetters.refreshLimits(topics);
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
    // Never resumed while draining: fetching stays paused until the group is left.
    if (this.paused === paused || this.state !== 'running' || this.draining) return;
    this.paused = paused;
    const topics = this.topics.map((t) => ({ topic: t.topic }));
    if (!this.supervisor.status().member) return; // applied when the restarted consumer runs
    if (paused) {
      this.consumer.pause(topics);
      this.m.pauses?.inc();
    } else {
      this.consumer.resume(topics);
      // Resuming a topic must not resume a halted partition.
      for (const h of this.halted.values()) this.consumer.pause([{ topic: h.topic, partitions: [h.partition] }]);
    }
    this.log.info({ paused }, paused ? 'fusion under pressure: fetching paused' : 'fusion relieved: fetching resumed');
  }
}
