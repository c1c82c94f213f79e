import { DEFAULTS } from '../../src/config.js';
import { DedupCache } from '../../src/dedup/index.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { LogWriter } from '../../src/engine/writer.js';
import { CacheWatermarks } from '../../src/fusion/cacheWatermarks.js';
import { Fusion } from '../../src/fusion/fusion.js';
import { KafkaIngress, type CommittedChunk, type KafkaIngressOptions } from '../../src/ingress/kafkaIngress.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';

/**
 * An in-process Kafka -> PostgreSQL ingest, wired as src/service.ts wires it
 * (engine, dedup cache, writer, fusion, Kafka ingress), minus HTTP. Adapted
 * from test/helpers/stack.ts; bench does not import test code.
 */
export interface IngestStack {
  engine: LogEngine;
  cache: DedupCache | undefined;
  fusion: Fusion;
  ingress: KafkaIngress;
  metrics: MetricsRegistry;
  stop(): Promise<void>;
}

/**
 * The consumer settings shared by the ingest and both kafkajs baselines (same
 * fetch, concurrency and commit policy): the service's defaults
 * (src/config.ts DEFAULTS; fetch size and wait are KafkaIngress's own
 * defaults), so the ingest is measured as it ships.
 */
export const CONSUMER_SETTINGS = {
  sessionTimeoutMs: 10_000,
  heartbeatIntervalMs: 1_000,
  partitionsConsumedConcurrently: DEFAULTS.ingressConcurrency,
  maxBytesPerPartition: 1024 * 1024,
  maxWaitTimeInMs: 250,
  commitEvery: DEFAULTS.ingressCommitEvery,
} as const;

/** PostgreSQL connections of the ingest (and of the sink, for the same count): the service default. */
export const POOL_SIZE = DEFAULTS.pgPoolSize;

export async function startIngestStack(opts: {
  databaseUrl: string;
  brokers: string[];
  topic: string;
  queue: string;
  group: string;
  poolSize: number;
  cacheMb: number | false;
  /** KafkaIngress's observer: called after each chunk's commit (the latency measurement). */
  onCommitted?: (chunk: CommittedChunk) => void;
}): Promise<IngestStack> {
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ connectionString: opts.databaseUrl, poolSize: opts.poolSize, metrics });
  await engine.start();
  const cache = opts.cacheMb === false ? undefined : new DedupCache({ capBytes: opts.cacheMb * 1024 * 1024 });
  const watermarks = cache ? new CacheWatermarks(cache, engine.pool, metrics) : undefined;
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024 * 1024, watermarks });
  // The service's defaults (src/config.ts DEFAULTS, src/service.ts: flushes = pool size - 2).
  const fusion = new Fusion(writer, {
    maxItems: DEFAULTS.bundleMaxItems,
    maxBytes: DEFAULTS.bundleMaxBytes,
    holdMs: DEFAULTS.bundleHoldMs,
    maxInflightBytes: DEFAULTS.maxInflightBytes,
    maxConcurrentFlushes: Math.max(1, opts.poolSize - 2),
    metrics,
  });
  await fusion.start();
  const ingressOpts: KafkaIngressOptions = {
    brokers: opts.brokers,
    clientId: 'queen-bench-ingest',
    groupId: opts.group,
    topics: [{ topic: opts.topic, queue: opts.queue }],
    dlqSuffix: '.dlq',
    ...CONSUMER_SETTINGS,
    fromBeginning: true,
    ...(opts.onCommitted ? { onCommitted: opts.onCommitted } : {}),
  };
  const ingress = new KafkaIngress(fusion, ingressOpts, silentLogger, metrics);
  try {
    await ingress.start();
  } catch (err) {
    await fusion.stop();
    await engine.stop();
    throw err;
  }
  return {
    engine,
    cache,
    fusion,
    ingress,
    metrics,
    async stop() {
      await ingress.stop();
      await fusion.stop();
      await engine.stop();
    },
  };
}
