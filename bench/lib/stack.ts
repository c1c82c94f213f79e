import { DEFAULTS } from '../../src/config.js';
import type { DedupCache } from '../../src/dedup/index.js';
import type { LogEngine } from '../../src/engine/logEngine.js';
import type { Fusion } from '../../src/fusion/fusion.js';
import {
  FETCH_MAX_WAIT_MS,
  FETCH_MIN_BYTES,
  KafkaIngress,
  type CommittedChunk,
  type KafkaIngressOptions,
} from '../../src/ingress/kafkaIngress.js';
import { defaultPipelineOptions, WritePipeline } from '../../src/pipeline.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import type { MetricsRegistry } from '../../src/telemetry/metrics.js';

/**
 * An in-process Kafka -> PostgreSQL ingest: the service's write pipeline
 * (src/pipeline.ts, its defaults) plus the Kafka ingress, minus HTTP.
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
  minBytes: FETCH_MIN_BYTES,
  maxWaitTimeInMs: FETCH_MAX_WAIT_MS,
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
  /** QUEEN_INGRESS_KEEP_ORIGIN (default true, as the service). */
  keepOrigin?: boolean;
}): Promise<IngestStack> {
  const pipeline = new WritePipeline(defaultPipelineOptions(opts.databaseUrl, { poolSize: opts.poolSize, cacheMb: opts.cacheMb }));
  await pipeline.start();
  const { engine, cache, fusion, metrics } = pipeline;
  const ingressOpts: KafkaIngressOptions = {
    brokers: opts.brokers,
    clientId: 'queen-bench-ingest',
    groupId: opts.group,
    topics: [{ topic: opts.topic, queue: opts.queue }],
    dlqSuffix: '.dlq',
    ...CONSUMER_SETTINGS,
    fromBeginning: true,
    keepOrigin: opts.keepOrigin ?? true,
    ...(opts.onCommitted ? { onCommitted: opts.onCommitted } : {}),
  };
  const ingress = new KafkaIngress(fusion, ingressOpts, silentLogger, metrics);
  try {
    await ingress.start();
  } catch (err) {
    await pipeline.stop();
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
      await pipeline.stop();
    },
  };
}
