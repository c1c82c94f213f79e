import type { Config } from './config.js';
import { LogEngine } from './engine/logEngine.js';
import { migrate } from './engine/migrate.js';
import { LogWriter } from './engine/writer.js';
import { DedupCache } from './dedup/index.js';
import { CacheWatermarks } from './fusion/cacheWatermarks.js';
import { Fusion } from './fusion/fusion.js';
import { HttpApi } from './http/server.js';
import { KafkaIngress } from './ingress/kafkaIngress.js';
import type { Logger } from './telemetry/logger.js';
import { MetricsRegistry } from './telemetry/metrics.js';
import { Component } from './util/lifecycle.js';

/**
 * The whole service. Start order: engine (and migrations) -> fusion -> HTTP
 * API -> Kafka ingress; stop in reverse, so in-flight HTTP pushes and Kafka
 * batches can still reach PostgreSQL while the producers are turned away.
 */
export class Service extends Component {
  readonly metrics = new MetricsRegistry();
  readonly engine: LogEngine;
  readonly cache: DedupCache | undefined;
  readonly writer: LogWriter;
  readonly fusion: Fusion;
  readonly ingress: KafkaIngress | undefined;
  readonly http: HttpApi;

  constructor(
    readonly config: Config,
    private readonly log: Logger,
  ) {
    super('Service');
    this.engine = new LogEngine({ connectionString: config.databaseUrl, poolSize: config.pgPoolSize, metrics: this.metrics });
    // QUEEN_DEDUP_CACHE=0: no cache, every push probes the whole window (-1), which is always exact.
    if (config.dedupCacheEnabled) {
      this.cache = new DedupCache({ capBytes: config.dedupCacheMb * 1024 * 1024, onWarn: (message) => log.warn(message) });
    }
    const watermarks = this.cache
      ? new CacheWatermarks(this.cache, this.engine.pool, this.metrics, (err, partitionId) =>
          log.warn({ err: (err as Error).message, partitionId }, 'dedup cache hydration failed; the partition probes the full window meanwhile'),
        )
      : undefined;
    this.writer = new LogWriter(this.engine, { maxPayloadBytes: config.maxPayloadBytes, metadataTtlMs: config.metadataTtlMs, watermarks });
    this.fusion = new Fusion(this.writer, {
      maxItems: config.bundleMaxItems,
      maxBytes: config.bundleMaxBytes,
      holdMs: config.bundleHoldMs,
      maxInflightBytes: config.maxInflightBytes,
      maxConcurrentFlushes: Math.max(1, config.pgPoolSize - 2),
      metrics: this.metrics,
    });
    this.http = new HttpApi({
      fusion: this.fusion,
      pool: this.engine.pool,
      metrics: this.metrics,
      authToken: config.authToken,
      maxBodyBytes: config.maxBodyBytes,
      host: config.httpHost,
      port: config.httpPort,
      logger: log.child({ component: 'http' }),
    });
    if (config.ingressTopics.length > 0) {
      this.ingress = new KafkaIngress(
        this.fusion,
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
        },
        log.child({ component: 'ingress' }),
        this.metrics,
      );
    }
  }

  protected async onStart(): Promise<void> {
    await this.engine.start();
    const { applied } = await migrate(this.engine.pool);
    this.log.info({ applied }, 'migrations applied');
    await this.fusion.start();
    await this.http.start();
    if (this.ingress) await this.ingress.start();
    else this.log.info('no QUEEN_INGRESS_TOPICS: Kafka ingress not started');
  }

  protected async onStop(): Promise<void> {
    await this.ingress?.stop();
    await this.http.stop();
    await this.fusion.stop();
    await this.engine.stop();
  }
}
