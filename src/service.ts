import type { Config } from './config.js';
import { migrate } from './engine/migrate.js';
import { HTTP_DEFAULTS, HttpApi } from './http/server.js';
import { localReadiness, type FleetView } from './http/routes/ops.js';
import { KafkaIngress } from './ingress/kafkaIngress.js';
import { SchemaRegistryDecoder } from './ingress/schemaRegistry.js';
import { LagMonitor } from './ingress/lagMonitor.js';
import { buildInfo } from './telemetry/buildInfo.js';
import { pipelineOptions, WritePipeline } from './pipeline.js';
import { RetentionService } from './retention/retentionService.js';
import { TimerSweeper } from './timers/timerSweeper.js';
import { ReadPath } from './read/readPath.js';
import type { Logger } from './telemetry/logger.js';
import { MetricsRegistry } from './telemetry/metrics.js';
import { Component } from './util/lifecycle.js';

/**
 * What this broker is within its pod (docs/scaling.md). Absent: the single
 * process (QUEEN_WORKERS=1), slot 0 with housekeeping and no fleet.
 */
export interface BrokerRole {
  /** Worker slot, 0 .. QUEEN_WORKERS-1. */
  slot: number;
  /**
   * Runs the pod's one timer sweeper and Kafka lag monitor (slot 0): both are
   * per pod, not per worker, so N workers keep the database's timer polls
   * and the broker's lag reads at today's rate.
   */
  housekeeping: boolean;
  /** The pod as a whole, answered by the primary: /metrics and /health/ready use it. */
  fleet?: FleetView;
}

/**
 * The whole service. Start order: write pipeline (engine, cache, fusion) and
 * migrations -> HTTP API -> Kafka ingress; stop in reverse, so in-flight HTTP
 * pushes and Kafka batches can still reach PostgreSQL while the producers are
 * turned away.
 */
export class Service extends Component {
  readonly metrics = new MetricsRegistry();
  readonly pipeline: WritePipeline;
  readonly ingress: KafkaIngress | undefined;
  readonly lag: LagMonitor | undefined;
  readonly http: HttpApi;
  readonly retention: RetentionService | undefined;
  readonly timers: TimerSweeper | undefined;
  readonly read: ReadPath;

  constructor(
    readonly config: Config,
    private readonly log: Logger,
    role: BrokerRole = { slot: 0, housekeeping: true },
  ) {
    super('Service');
    this.metrics.collectDefaults();
    const build = buildInfo(config.buildCommit);
    this.metrics.buildInfo(build.version, build.commit);
    // QUEEN_DEDUP_CACHE=0: no cache, every push probes the whole window (-1), which is always exact.
    this.pipeline = new WritePipeline({
      ...pipelineOptions(config, this.metrics),
      onCacheWarning: (message) => log.warn(message),
      compactionLogger: log.child({ component: 'compaction' }),
      prewarmLogger: log.child({ component: 'dedup-prewarm' }),
      onDedupError: (err, partitionId, what) =>
        log.warn(
          { err: (err as Error).message, partitionId },
          what === 'lookup'
            ? 'dedup lookup failed; its segments are pushed with the full probe'
            : 'dedup cache hydration failed; the partition probes the full window meanwhile',
        ),
    });
    this.read = new ReadPath(this.pipeline.engine, this.pipeline.writer, {
      connectionString: config.databaseUrl,
      metrics: this.metrics,
      logger: log.child({ component: 'read' }),
    });
    this.http = new HttpApi({
      read: this.read,
      fusion: this.pipeline.fusion,
      pool: this.pipeline.engine.pool,
      metrics: this.metrics,
      authToken: config.authToken,
      maxBodyBytes: config.maxBodyBytes,
      host: config.httpHost,
      port: config.httpPort,
      logger: log.child({ component: 'http' }),
      ingressReadiness: () => this.ingress?.status(),
      fleet: role.fleet,
      build,
    });
    workerGauges(this.metrics, role.slot, this.pipeline.cacheCapBytes, config.pgPoolSize);
    // Every worker runs one: leadership is a PostgreSQL session advisory lock
    // plus a fence (RetentionService), so N workers are N contenders exactly
    // as N brokers are, still one leader; and when the leader's worker dies,
    // another worker takes over at its next pass without waiting for the
    // replacement.
    if (config.retentionEnabled) {
      this.retention = new RetentionService({
        connectionString: config.databaseUrl!,
        intervalMs: config.retentionIntervalMs,
        batchRows: config.retentionBatchRows,
        batchBytes: config.retentionBatchBytes,
        concurrency: config.retentionConcurrency,
        vacuumIntervalMs: config.retentionVacuumIntervalMs,
        metrics: this.metrics,
        logger: log.child({ component: 'retention' }),
      });
    }
    if (config.timersEnabled && role.housekeeping) {
      this.timers = new TimerSweeper({
        pool: this.pipeline.engine.pool,
        pollMs: config.timerPollMs,
        batch: config.timerBatch,
        metrics: this.metrics,
        logger: log.child({ component: 'timers' }),
      });
    }
    if (config.ingressTopics.length > 0 || config.ingressTopicPatterns.length > 0) {
      const { heartbeatInterval, maxBytesPerPartition, maxWaitTimeInMs, ...consumer } = config.kafkaConsumer;
      this.ingress = new KafkaIngress(
        this.pipeline.fusion,
        {
          brokers: config.kafkaBrokers,
          groupId: config.ingressGroup,
          topics: config.ingressTopics,
          topicPatterns: config.ingressTopicPatterns,
          dlqSuffix: config.dlqSuffix,
          partitionsConsumedConcurrently: config.ingressConcurrency,
          commitEvery: config.ingressCommitEvery,
          sessionTimeoutMs: config.kafkaSessionTimeoutMs,
          heartbeatIntervalMs: heartbeatInterval ?? Math.min(3_000, Math.floor(config.kafkaSessionTimeoutMs / 5)),
          maxBytesPerPartition,
          maxWaitTimeInMs,
          consumer,
          fromBeginning: config.ingressFromBeginning,
          clientId: config.kafkaClientId,
          ssl: config.kafkaTls,
          sasl: config.kafkaSasl,
          errorsTolerance: config.ingressErrorsTolerance,
          deadLetterErrorsTolerance: config.ingressDlqErrorsTolerance,
          missingId: config.ingressMissingId,
          keepOrigin: config.ingressKeepOrigin,
          stuckAfterMs: config.ingressStuckAfterMs,
          topicRefreshMs: config.ingressTopicRefreshMs,
          restartBackoffMaxMs: config.ingressRestartBackoffMaxMs,
          schemaRegistry: config.schemaRegistry
            ? SchemaRegistryDecoder.fromConfig(config.schemaRegistry, log.child({ component: 'schema-registry' }), this.metrics)
            : undefined,
        },
        log.child({ component: 'ingress' }),
        this.metrics,
      );
      if (role.housekeeping)
        this.lag = new LagMonitor(
          {
            brokers: config.kafkaBrokers,
            groupId: config.ingressGroup,
            // The ingress's topics, patterns' matches included (read at each pass: the lag monitor starts after the ingress).
            topics: () => this.ingress?.topicNames() ?? [],
            intervalMs: config.lagIntervalMs,
            clientId: config.kafkaClientId,
            ssl: config.kafkaTls,
            sasl: config.kafkaSasl,
          },
          log.child({ component: 'lag' }),
          this.metrics,
        );
    }
  }

  /** This process's own readiness (a worker's answer to the primary): PostgreSQL and the Kafka consumer. */
  readiness(): Promise<{ ready: boolean; reasons: string[] }> {
    return localReadiness(this.pipeline.engine.pool, HTTP_DEFAULTS.healthTimeoutMs, () => this.ingress?.status());
  }

  /**
   * Phase 1 of a pod's stop (docs/scaling.md, "Stopping"): the Kafka ingress
   * drains (fetching stopped, chunks settled, verified offsets committed)
   * but stays in the group; everything else keeps running until stop(). The
   * HTTP API still answers the pushes already on their way; readiness
   * answers not ready (the worker's fleet link says so).
   */
  async drain(): Promise<void> {
    await this.ingress?.drain();
  }

  protected async onStart(): Promise<void> {
    await this.pipeline.start();
    const { applied, functions, newerSchema } = await migrate(this.pipeline.engine.pool);
    if (newerSchema !== undefined) {
      this.log.warn(
        { newerSchema },
        "the database's schema is a newer release's: this broker runs on it as that release's predecessor and leaves its function files alone (docs/sql-layout.md)",
      );
    } else this.log.info({ applied, functions }, 'migrations applied');
    // After the migrations (their tables), before the API (nothing depends on them).
    await this.retention?.start();
    await this.timers?.start();
    await this.read.start();
    await this.http.start();
    if (this.ingress) await this.ingress.start();
    if (this.lag) await this.lag.start();
    if (!this.ingress) this.log.info('no QUEEN_INGRESS_TOPICS: Kafka ingress not started');
  }

  protected async onStop(): Promise<void> {
    await this.lag?.stop();
    await this.ingress?.stop();
    await this.http.stop();
    await this.timers?.stop();
    await this.retention?.stop();
    await this.read.stop();
    await this.pipeline.stop();
  }
}

/**
 * Per-worker series: each carries its own labels, so summing over a pod's
 * workers keeps one series per worker. `queen_workers` is 1 in each worker,
 * so the pod's /metrics reads how many answered the scrape.
 */
function workerGauges(metrics: MetricsRegistry, slot: number, cacheCapBytes: number, pgPoolSize: number): void {
  metrics.gauge('queen_workers', 'Broker worker processes that answered this scrape (QUEEN_WORKERS when all are up)').set(1);
  metrics.gauge('queen_worker_info', 'One series per worker process of this pod: its slot and pid (always 1)', ['slot', 'pid']).set(1, {
    slot,
    pid: process.pid,
  });
  metrics
    .gauge('queen_worker_dedup_cache_budget_bytes', "This worker's dedup cache cap: its share of QUEEN_DEDUP_CACHE_MB", ['slot'])
    .set(cacheCapBytes, { slot });
  metrics
    .gauge('queen_worker_pg_pool_max_connections', "This worker's PostgreSQL pool size: its share of QUEEN_PG_POOL_SIZE", ['slot'])
    .set(pgPoolSize, { slot });
}
