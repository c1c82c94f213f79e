/**
 * The one place the environment is read. Every variable has a named default
 * and a validator; a bad value fails start-up with a message naming the
 * variable and its limit. Documented in README.md (keep the two in step).
 */

import { ConfigError } from './errors.js';
import { availableCpus } from './util/cpus.js';
import { bool, int, oneOf, ratio, url, type Env } from './config/env.js';
import { schemaRegistry, type SchemaRegistryConfig } from './config/schemaRegistry.js';

export { redactUrl } from './config/env.js';
export type { SchemaRegistryConfig } from './config/schemaRegistry.js';
import { parseConsumerSettings, type KafkaConsumerSettings } from './config/consumerSettings.js';
import {
  parseIngressTopics,
  parseMappings,
  type RecordMappingConfig,
  type TopicMapping,
  type TopicPattern,
} from './config/ingressTopics.js';
import { kafkaSasl, kafkaTls, type KafkaSasl, type KafkaTls } from './config/kafkaAccess.js';

export type { KafkaSasl, KafkaTls } from './config/kafkaAccess.js';
export { parseConsumerSettings, type KafkaConsumerSettings } from './config/consumerSettings.js';
export {
  DEFAULT_ID_SOURCES,
  matchTopicPatterns,
  parseIngressTopics,
  parseMappings,
  parseTopics,
  type IngressTopics,
  type TopicPattern,
  type IdSource,
  type PartitionSource,
  type RecordMappingConfig,
  type TopicMapping,
} from './config/ingressTopics.js';

// The variable readers (config/env.ts), the topics and their mappings
// (config/ingressTopics.ts), the kafkajs consumer options
// (config/consumerSettings.ts) and the brokers' TLS and SASL
// (config/kafkaAccess.ts) live in files of their own; this file holds the
// defaults, the Config shape and loadConfig, which reads every variable once.

/** QUEEN_DEDUP_LOOKUP's values: src/fusion/lookupPlacement.ts's LookupMode, which the pipeline passes them to. */
export const DEDUP_LOOKUPS = ['adaptive', 'apart', 'in-push'] as const;

export const DEFAULTS = {
  httpPort: 6632,
  httpHost: '0.0.0.0',
  pgPoolSize: 10,
  dedupCacheEnabled: true,
  dedupCacheMb: 512,
  /** At start, the cache is warmed with up to this many partitions written within their window, most recent first (0: off). */
  dedupPrewarmPartitions: 4096,
  /** A push that probed at least this many stored hashes asks for its partition's compaction (0: never compact). */
  compactionMinTail: 512,
  /** Runs of one size tier merged into one of the next (sql/functions/compaction.sql); four times as many where runs are rarely read (src/compaction/mergeWidth.ts). */
  compactionFanout: 4,
  /** Where a filter's maybe items are looked up: apart, in the push's call, or per bundle by what its partitions' lookups found (src/fusion/lookupPlacement.ts). */
  dedupLookup: 'adaptive' as (typeof DEDUP_LOOKUPS)[number],
  maxPayloadBytes: 1024 * 1024,
  maxBodyBytes: 16 * 1024 * 1024,
  bundleMaxItems: 10_000,
  bundleMaxBytes: 8 * 1024 * 1024,
  bundleHoldMs: 0,
  maxInflightBytes: 64 * 1024 * 1024,
  ingressGroup: 'queen-ingress',
  dlqSuffix: '.dlq',
  logLevel: 'info',
  shutdownTimeoutMs: 15_000,
  metadataTtlMs: 30_000,
  ingressConcurrency: 16,
  ingressCommitEvery: 5000,
  kafkaSessionTimeoutMs: 30_000,
  ingressFromBeginning: true,
  retentionEnabled: true,
  retentionIntervalMs: 10_000,
  retentionBatchRows: 100,
  // A step's commit is a fixed part of its row-lock hold, which every push
  // of a bundle touching the partition waits for: a step that removes ~40
  // segments pays it once (docs/retention.md, "How long a step holds the lock").
  retentionBatchBytes: 1_048_576,
  retentionConcurrency: 8,
  retentionVacuumIntervalMs: 10_000,
  timersEnabled: true,
  timerPollMs: 100,
  timerBatch: 1000,
  kafkaClientId: 'queen-ingress',
  ingressErrorsTolerance: 'all',
  ingressDlqErrorsTolerance: 'none',
  ingressMissingId: 'dlq',
  ingressKeepOrigin: true,
  ingressStuckAfterMs: 120_000,
  // As the Java consumer's metadata.max.age.ms, which bounds when its pattern subscription sees a new topic.
  ingressTopicRefreshMs: 300_000,
  ingressRestartBackoffMaxMs: 30_000,
  lagIntervalMs: 15_000,
  traceSampleRatio: 1,
  traceKafkaRecords: false,
  schemaRegistryTimeoutMs: 5_000,
} as const;

export interface Config {
  /**
   * Broker processes in this pod (QUEEN_WORKERS; default: the CPUs the
   * process may use). 1 is the single process; above 1 a primary forks this
   * many workers (docs/scaling.md), each a whole broker with a 1/N share of
   * QUEEN_DEDUP_CACHE_MB and QUEEN_PG_POOL_SIZE.
   */
  workers: number;
  /**
   * Which worker this process is (0 .. workers-1), or undefined in the
   * primary and in a single process. Set by the primary when it forks a
   * worker (QUEEN_WORKER_SLOT); not an operator setting.
   */
  workerSlot: number | undefined;
  databaseUrl: string | undefined;
  kafkaBrokers: string[];
  httpPort: number;
  httpHost: string;
  authToken: string | undefined;
  pgPoolSize: number;
  dedupCacheEnabled: boolean;
  dedupCacheMb: number;
  dedupPrewarmPartitions: number;
  compactionMinTail: number;
  compactionFanout: number;
  dedupLookup: (typeof DEDUP_LOOKUPS)[number];
  maxPayloadBytes: number;
  maxBodyBytes: number;
  bundleMaxItems: number;
  bundleMaxBytes: number;
  bundleHoldMs: number;
  maxInflightBytes: number;
  /** The literal topics of QUEEN_INGRESS_TOPICS. */
  ingressTopics: TopicMapping[];
  /** Its /regex/ entries: the topics they match are resolved when the ingress starts. */
  ingressTopicPatterns: TopicPattern[];
  ingressGroup: string;
  ingressConcurrency: number;
  ingressCommitEvery: number;
  ingressFromBeginning: boolean;
  kafkaSessionTimeoutMs: number;
  /** kafkajs consumer options passed through (QUEEN_KAFKA_CONSUMER), validated; its sessionTimeout is kafkaSessionTimeoutMs. */
  kafkaConsumer: Omit<KafkaConsumerSettings, 'sessionTimeout'>;
  dlqSuffix: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  shutdownTimeoutMs: number;
  metadataTtlMs: number;
  otlpEndpoint: string | undefined;
  serviceName: string;
  retentionEnabled: boolean;
  retentionIntervalMs: number;
  retentionBatchRows: number;
  /** Most segment bytes one retention step removes past its first segment (bounds the row-lock hold). */
  retentionBatchBytes: number;
  /** Retention steps the leader runs at once, each on its own session and on a distinct partition. */
  retentionConcurrency: number;
  /** Least ms between two VACUUMs of log_segments/log_txns by the retention leader while its steps remove rows (0: autovacuum only). */
  retentionVacuumIntervalMs: number;
  timersEnabled: boolean;
  timerPollMs: number;
  timerBatch: number;
  kafkaClientId: string;
  kafkaTls: KafkaTls | undefined;
  kafkaSasl: KafkaSasl | undefined;
  ingressErrorsTolerance: 'all' | 'none';
  /** A failing dead-letter write: 'none' halts its partition (retrying, resumes by itself); 'all' skips its records (logged, counted). */
  ingressDlqErrorsTolerance: 'all' | 'none';
  /** A Kafka record without a transactionId: dead-lettered, its partition halted, or stored under topic/partition/offset. */
  ingressMissingId: 'dlq' | 'fail' | 'offset';
  /** Keep each record's topic, partition, offset, timestamp and headers with its message (frame format v2); pop and browse return them. */
  ingressKeepOrigin: boolean;
  ingressStuckAfterMs: number;
  /** How often QUEEN_INGRESS_TOPICS's patterns are matched again against the broker's topics (0 = only at start). */
  ingressTopicRefreshMs: number;
  ingressRestartBackoffMaxMs: number;
  /** How often consumer lag is read from the broker. */
  lagIntervalMs: number;
  /** Head sampling ratio for traces that start here (a sampled parent is always followed). */
  traceSampleRatio: number;
  /** Also run @opentelemetry/instrumentation-kafkajs's per-record consumer spans (docs/observability.md: their cost). */
  traceKafkaRecords: boolean;
  /** Where framed Avro/Protobuf/JSON Schema values are decoded (docs/kafka-ingress.md); undefined: no registry. */
  schemaRegistry: SchemaRegistryConfig | undefined;
  /** Commit in queen_build_info (the image sets it; otherwise read from git when available). */
  buildCommit: string | undefined;
}

export function loadConfig(env: Env = process.env): Config {
  const brokers = (env.KAFKA_BROKERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const b of brokers) {
    if (!/^[^:\s]+:\d{1,5}$/.test(b)) throw new ConfigError(`KAFKA_BROKERS must be a comma-separated list of host:port, got "${b}"`);
  }
  const topics = parseIngressTopics(env.QUEEN_INGRESS_TOPICS);
  const sessionTimeoutMs = int(env, 'QUEEN_KAFKA_SESSION_TIMEOUT_MS', DEFAULTS.kafkaSessionTimeoutMs, 6_000, 300_000);
  const { sessionTimeout, ...kafkaConsumer } = parseConsumerSettings(env.QUEEN_KAFKA_CONSUMER, sessionTimeoutMs);
  if (sessionTimeout !== undefined && env.QUEEN_KAFKA_SESSION_TIMEOUT_MS?.trim() && sessionTimeout !== sessionTimeoutMs)
    throw new ConfigError(
      `QUEEN_KAFKA_CONSUMER.sessionTimeout (${sessionTimeout}) contradicts QUEEN_KAFKA_SESSION_TIMEOUT_MS (${sessionTimeoutMs}): set one of them`,
    );
  const cfg: Config = {
    workers: int(env, 'QUEEN_WORKERS', availableCpus(), 1, 256),
    workerSlot: env.QUEEN_WORKER_SLOT ? int(env, 'QUEEN_WORKER_SLOT', 0, 0, 255) : undefined,
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    kafkaBrokers: brokers,
    httpPort: int(env, 'QUEEN_HTTP_PORT', DEFAULTS.httpPort, 0, 65535),
    httpHost: env.QUEEN_HTTP_HOST?.trim() || DEFAULTS.httpHost,
    authToken: env.QUEEN_AUTH_TOKEN || undefined,
    pgPoolSize: int(env, 'QUEEN_PG_POOL_SIZE', DEFAULTS.pgPoolSize, 1, 200),
    dedupCacheEnabled: bool(env, 'QUEEN_DEDUP_CACHE', DEFAULTS.dedupCacheEnabled),
    dedupCacheMb: int(env, 'QUEEN_DEDUP_CACHE_MB', DEFAULTS.dedupCacheMb, 1, 1024 * 1024),
    dedupPrewarmPartitions: int(env, 'QUEEN_DEDUP_PREWARM_PARTITIONS', DEFAULTS.dedupPrewarmPartitions, 0, 1_000_000),
    compactionMinTail: int(env, 'QUEEN_COMPACTION_MIN_TAIL', DEFAULTS.compactionMinTail, 0, 10_000_000),
    compactionFanout: int(env, 'QUEEN_COMPACTION_FANOUT', DEFAULTS.compactionFanout, 2, 64),
    dedupLookup: oneOf(env, 'QUEEN_DEDUP_LOOKUP', DEFAULTS.dedupLookup, DEDUP_LOOKUPS),
    maxPayloadBytes: int(env, 'QUEEN_MAX_PAYLOAD_BYTES', DEFAULTS.maxPayloadBytes, 1, 64 * 1024 * 1024),
    maxBodyBytes: int(env, 'QUEEN_MAX_BODY_BYTES', DEFAULTS.maxBodyBytes, 1024, 1024 * 1024 * 1024),
    bundleMaxItems: int(env, 'QUEEN_BUNDLE_MAX_ITEMS', DEFAULTS.bundleMaxItems, 1, 100_000),
    bundleMaxBytes: int(env, 'QUEEN_BUNDLE_MAX_BYTES', DEFAULTS.bundleMaxBytes, 1024, 512 * 1024 * 1024),
    bundleHoldMs: int(env, 'QUEEN_BUNDLE_HOLD_MS', DEFAULTS.bundleHoldMs, 0, 1000),
    maxInflightBytes: int(env, 'QUEEN_MAX_INFLIGHT_BYTES', DEFAULTS.maxInflightBytes, 1024 * 1024, 8 * 1024 * 1024 * 1024),
    ingressTopics: topics.topics,
    ingressTopicPatterns: topics.patterns,
    ingressGroup: env.QUEEN_INGRESS_GROUP?.trim() || DEFAULTS.ingressGroup,
    ingressConcurrency: int(env, 'QUEEN_INGRESS_CONCURRENCY', DEFAULTS.ingressConcurrency, 1, 1000),
    ingressCommitEvery: int(env, 'QUEEN_INGRESS_COMMIT_EVERY', DEFAULTS.ingressCommitEvery, 1, 1_000_000),
    ingressFromBeginning: bool(env, 'QUEEN_INGRESS_FROM_BEGINNING', DEFAULTS.ingressFromBeginning),
    kafkaSessionTimeoutMs: sessionTimeout ?? sessionTimeoutMs,
    kafkaConsumer,
    dlqSuffix: env.QUEEN_DLQ_SUFFIX ?? DEFAULTS.dlqSuffix,
    logLevel: oneOf(env, 'QUEEN_LOG_LEVEL', DEFAULTS.logLevel, ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const),
    shutdownTimeoutMs: int(env, 'QUEEN_SHUTDOWN_TIMEOUT_MS', DEFAULTS.shutdownTimeoutMs, 100, 600_000),
    metadataTtlMs: int(env, 'QUEEN_METADATA_TTL_MS', DEFAULTS.metadataTtlMs, 0, 3_600_000),
    otlpEndpoint: url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']),
    serviceName: env.OTEL_SERVICE_NAME?.trim() || 'queen-ingress',
    retentionEnabled: bool(env, 'QUEEN_RETENTION', DEFAULTS.retentionEnabled),
    retentionIntervalMs: int(env, 'QUEEN_RETENTION_INTERVAL_MS', DEFAULTS.retentionIntervalMs, 100, 3_600_000),
    retentionBatchRows: int(env, 'QUEEN_RETENTION_BATCH_ROWS', DEFAULTS.retentionBatchRows, 1, 100_000),
    retentionBatchBytes: int(env, 'QUEEN_RETENTION_BATCH_BYTES', DEFAULTS.retentionBatchBytes, 1024, 1_073_741_824),
    retentionConcurrency: int(env, 'QUEEN_RETENTION_CONCURRENCY', DEFAULTS.retentionConcurrency, 1, 32),
    retentionVacuumIntervalMs: int(env, 'QUEEN_RETENTION_VACUUM_INTERVAL_MS', DEFAULTS.retentionVacuumIntervalMs, 0, 86_400_000),
    timersEnabled: bool(env, 'QUEEN_TIMERS', DEFAULTS.timersEnabled),
    timerPollMs: int(env, 'QUEEN_TIMER_POLL_MS', DEFAULTS.timerPollMs, 10, 60_000),
    timerBatch: int(env, 'QUEEN_TIMER_BATCH', DEFAULTS.timerBatch, 1, 10_000),
    kafkaClientId: env.KAFKA_CLIENT_ID?.trim() || DEFAULTS.kafkaClientId,
    kafkaTls: kafkaTls(env),
    kafkaSasl: kafkaSasl(env),
    ingressErrorsTolerance: oneOf(env, 'QUEEN_INGRESS_ERRORS_TOLERANCE', DEFAULTS.ingressErrorsTolerance, ['all', 'none'] as const),
    ingressDlqErrorsTolerance: oneOf(env, 'QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE', DEFAULTS.ingressDlqErrorsTolerance, [
      'none',
      'all',
    ] as const),
    ingressMissingId: oneOf(env, 'QUEEN_INGRESS_MISSING_ID', DEFAULTS.ingressMissingId, ['dlq', 'fail', 'offset'] as const),
    ingressKeepOrigin: bool(env, 'QUEEN_INGRESS_KEEP_ORIGIN', DEFAULTS.ingressKeepOrigin),
    ingressStuckAfterMs: int(env, 'QUEEN_INGRESS_STUCK_AFTER_MS', DEFAULTS.ingressStuckAfterMs, 1_000, 3_600_000),
    ingressTopicRefreshMs: int(env, 'QUEEN_INGRESS_TOPIC_REFRESH_MS', DEFAULTS.ingressTopicRefreshMs, 0, 86_400_000),
    ingressRestartBackoffMaxMs: int(env, 'QUEEN_INGRESS_RESTART_BACKOFF_MAX_MS', DEFAULTS.ingressRestartBackoffMaxMs, 1_000, 600_000),
    lagIntervalMs: int(env, 'QUEEN_LAG_INTERVAL_MS', DEFAULTS.lagIntervalMs, 100, 3_600_000),
    traceSampleRatio: ratio(env, 'OTEL_TRACES_SAMPLER_ARG', DEFAULTS.traceSampleRatio),
    traceKafkaRecords: bool(env, 'QUEEN_OTEL_KAFKAJS_INSTRUMENTATION', DEFAULTS.traceKafkaRecords),
    buildCommit: env.QUEEN_BUILD_COMMIT?.trim() || undefined,
    schemaRegistry: schemaRegistry(env, DEFAULTS.schemaRegistryTimeoutMs),
  };
  if (!/^[A-Za-z0-9._-]{1,255}$/.test(cfg.kafkaClientId)) {
    throw new ConfigError(`KAFKA_CLIENT_ID must match [A-Za-z0-9._-]{1,255}, got "${cfg.kafkaClientId}"`);
  }
  if (cfg.dlqSuffix === '' || !/^[A-Za-z0-9._-]+$/.test(cfg.dlqSuffix)) {
    throw new ConfigError(`QUEEN_DLQ_SUFFIX must be non-empty and match [A-Za-z0-9._-]+, got "${cfg.dlqSuffix}"`);
  }
  if (cfg.bundleMaxBytes < cfg.maxPayloadBytes) {
    throw new ConfigError(
      `QUEEN_BUNDLE_MAX_BYTES (${cfg.bundleMaxBytes}) must be at least QUEEN_MAX_PAYLOAD_BYTES (${cfg.maxPayloadBytes})`,
    );
  }
  const mappings = parseMappings(
    env.QUEEN_INGRESS_MAPPING,
    cfg.ingressTopics,
    cfg.ingressMissingId,
    'QUEEN_INGRESS_MAPPING',
    cfg.ingressTopicPatterns,
  );
  cfg.ingressTopics = cfg.ingressTopics.map((t) => (mappings.has(t.topic) ? { ...t, mapping: mappings.get(t.topic)! } : t));
  cfg.ingressTopicPatterns = withPatternMappings(cfg.ingressTopicPatterns, cfg.ingressTopics, mappings);
  if (cfg.ingressTopicRefreshMs > 0 && cfg.ingressTopicRefreshMs < 1_000)
    throw new ConfigError(
      `QUEEN_INGRESS_TOPIC_REFRESH_MS must be 0 (only at start) or between 1000 and 86400000, got ${cfg.ingressTopicRefreshMs}`,
    );
  if ((cfg.ingressTopics.length > 0 || cfg.ingressTopicPatterns.length > 0) && cfg.kafkaBrokers.length === 0) {
    throw new ConfigError('QUEEN_INGRESS_TOPICS is set but KAFKA_BROKERS is empty: name the brokers to consume from');
  }
  return cfg;
}

/**
 * Hands each pattern its mappings: the one keyed by the pattern as written,
 * and those keyed by a topic name it matches (to the first pattern that
 * matches the name, the one that will consume it; a literal topic's own
 * mapping stays with the literal topic).
 */
function withPatternMappings(
  patterns: readonly TopicPattern[],
  literal: readonly TopicMapping[],
  mappings: ReadonlyMap<string, RecordMappingConfig>,
): TopicPattern[] {
  const taken = new Set([...literal.map((t) => t.topic), ...patterns.map((p) => p.source)]);
  return patterns.map((p) => {
    const q: TopicPattern = { ...p };
    const own = mappings.get(p.source);
    if (own) q.mapping = own;
    for (const [name, m] of mappings) {
      if (taken.has(name) || patterns.find((r) => r.pattern.test(name)) !== p) continue;
      (q.topicMappings ??= {})[name] = m;
    }
    return q;
  });
}
