import type { Config } from './config.js';
import { migrate } from './engine/migrate.js';
import { HttpApi } from './http/server.js';
import { KafkaIngress } from './ingress/kafkaIngress.js';
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
  ) {
    super('Service');
    this.metrics.collectDefaults();
    const build = buildInfo(config.buildCommit);
    this.metrics.buildInfo(build.version, build.commit);
    // QUEEN_DEDUP_CACHE=0: no cache, every push probes the whole window (-1), which is always exact.
    this.pipeline = new WritePipeline({
      ...pipelineOptions(config, this.metrics),
      onCacheWarning: (message) => log.warn(message),
      onHydrationError: (err, partitionId) =>
        log.warn(
          { err: (err as Error).message, partitionId },
          'dedup cache hydration failed; the partition probes the full window meanwhile',
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
    });
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
    if (config.timersEnabled) {
      this.timers = new TimerSweeper({
        pool: this.pipeline.engine.pool,
        pollMs: config.timerPollMs,
        batch: config.timerBatch,
        metrics: this.metrics,
        logger: log.child({ component: 'timers' }),
      });
    }
    if (config.ingressTopics.length > 0) {
      this.ingress = new KafkaIngress(
        this.pipeline.fusion,
        {
          brokers: config.kafkaBrokers,
          groupId: config.ingressGroup,
          topics: config.ingressTopics,
          dlqSuffix: config.dlqSuffix,
          partitionsConsumedConcurrently: config.ingressConcurrency,
          commitEvery: config.ingressCommitEvery,
          sessionTimeoutMs: config.kafkaSessionTimeoutMs,
          heartbeatIntervalMs: Math.min(3_000, Math.floor(config.kafkaSessionTimeoutMs / 5)),
          fromBeginning: config.ingressFromBeginning,
          clientId: config.kafkaClientId,
          ssl: config.kafkaTls,
          sasl: config.kafkaSasl,
          errorsTolerance: config.ingressErrorsTolerance,
          deadLetterErrorsTolerance: config.ingressDlqErrorsTolerance,
          missingId: config.ingressMissingId,
          stuckAfterMs: config.ingressStuckAfterMs,
          restartBackoffMaxMs: config.ingressRestartBackoffMaxMs,
        },
        log.child({ component: 'ingress' }),
        this.metrics,
      );
      this.lag = new LagMonitor(
        {
          brokers: config.kafkaBrokers,
          groupId: config.ingressGroup,
          topics: config.ingressTopics.map((t) => t.topic),
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

  protected async onStart(): Promise<void> {
    await this.pipeline.start();
    const { applied } = await migrate(this.pipeline.engine.pool);
    this.log.info({ applied }, 'migrations applied');
    // After the migrations (their tables), before the API (nothing depends on them).
    await this.retention?.start();
    await this.timers?.start();
    await this.read.start();
    await this.http.start();
    if (this.ingress) await this.ingress.start();
    if (this.lag) await this.lag.start();
    else this.log.info('no QUEEN_INGRESS_TOPICS: Kafka ingress not started');
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
