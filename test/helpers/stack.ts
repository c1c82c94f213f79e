import { LogEngine } from '../../src/engine/logEngine.js';
import { LogWriter } from '../../src/engine/writer.js';
import { DedupCache } from '../../src/dedup/index.js';
import { CacheWatermarks } from '../../src/fusion/cacheWatermarks.js';
import { Fusion } from '../../src/fusion/fusion.js';
import { KafkaIngress, type CommittedChunk } from '../../src/ingress/kafkaIngress.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { DEFAULTS } from '../../src/config.js';
import { brokers } from './kafka.js';

export interface IngestStack {
  engine: LogEngine;
  cache: DedupCache | undefined;
  writer: LogWriter;
  fusion: Fusion;
  ingress: KafkaIngress;
  metrics: MetricsRegistry;
  stop(): Promise<void>;
}

/** An in-process ingress instance: its own pool, writer, fusion and consumer. */
export async function startIngestStack(opts: {
  databaseUrl: string;
  topic: string;
  queue?: string;
  group: string;
  maxPayloadBytes?: number;
  /** Dedup cache budget in MB, or false for no cache (every push probes with -1). Default 64. */
  cacheMb?: number | false;
  onCommitted?: (chunk: CommittedChunk) => void;
  maxInflightBytes?: number;
}): Promise<IngestStack> {
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ connectionString: opts.databaseUrl, poolSize: 6, metrics });
  await engine.start();
  const cache = opts.cacheMb === false ? undefined : new DedupCache({ capBytes: (opts.cacheMb ?? 64) * 1024 * 1024 });
  const watermarks = cache ? new CacheWatermarks(cache, engine.pool, metrics) : undefined;
  const writer = new LogWriter(engine, { maxPayloadBytes: opts.maxPayloadBytes ?? 1024 * 1024, watermarks });
  // The service's defaults, so tests exercise what runs in production.
  const fusion = new Fusion(writer, { maxItems: DEFAULTS.bundleMaxItems, maxBytes: DEFAULTS.bundleMaxBytes, holdMs: DEFAULTS.bundleHoldMs, maxInflightBytes: opts.maxInflightBytes ?? 64 << 20, maxConcurrentFlushes: 4, metrics });
  await fusion.start();
  const ingress = new KafkaIngress(
    fusion,
    {
      brokers: brokers(),
      groupId: opts.group,
      topics: [{ topic: opts.topic, queue: opts.queue ?? opts.topic }],
      dlqSuffix: '.dlq',
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1_000,
      partitionsConsumedConcurrently: 8,
      onCommitted: opts.onCommitted,
    },
    silentLogger,
    metrics,
  );
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
    writer,
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
