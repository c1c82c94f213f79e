import type { DedupCache } from '../../src/dedup/index.js';
import type { LogEngine } from '../../src/engine/logEngine.js';
import type { LogWriter } from '../../src/engine/writer.js';
import type { Fusion } from '../../src/fusion/fusion.js';
import { KafkaIngress, type CommittedChunk, type KafkaIngressOptions } from '../../src/ingress/kafkaIngress.js';
import { defaultPipelineOptions, WritePipeline } from '../../src/pipeline.js';
import { silentLogger, type Logger } from '../../src/telemetry/logger.js';
import type { MetricsRegistry } from '../../src/telemetry/metrics.js';
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

/**
 * An in-process ingress instance: the service's write pipeline (its own pool,
 * cache, writer and fusion, with the service's defaults) and a consumer.
 */
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
  /** Overrides of the ingress options (DLQ, errors tolerance, TLS/SASL brokers...). */
  ingress?: Partial<KafkaIngressOptions>;
  logger?: Logger;
}): Promise<IngestStack> {
  const pipeline = new WritePipeline(
    defaultPipelineOptions(opts.databaseUrl, {
      poolSize: 6,
      cacheMb: opts.cacheMb ?? 64,
      ...(opts.maxPayloadBytes !== undefined ? { maxPayloadBytes: opts.maxPayloadBytes } : {}),
      ...(opts.maxInflightBytes !== undefined ? { maxInflightBytes: opts.maxInflightBytes } : {}),
    }),
  );
  await pipeline.start();
  const ingress = new KafkaIngress(
    pipeline.fusion,
    {
      brokers: opts.ingress?.brokers ?? brokers(),
      groupId: opts.group,
      topics: [{ topic: opts.topic, queue: opts.queue ?? opts.topic }],
      dlqSuffix: '.dlq',
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1_000,
      partitionsConsumedConcurrently: 8,
      onCommitted: opts.onCommitted,
      ...opts.ingress,
    },
    opts.logger ?? silentLogger,
    pipeline.metrics,
  );
  try {
    await ingress.start();
  } catch (err) {
    await pipeline.stop();
    throw err;
  }
  return {
    engine: pipeline.engine,
    cache: pipeline.cache,
    writer: pipeline.writer,
    fusion: pipeline.fusion,
    ingress,
    metrics: pipeline.metrics,
    async stop() {
      await ingress.stop();
      await pipeline.stop();
    },
  };
}
