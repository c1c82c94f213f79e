import type { KafkaConfig } from 'kafkajs';
import type { KafkaConsumerSettings, TopicMapping, TopicPattern } from '../config.js';
import type { MissingIdPolicy } from './recordMapping.js';
import type { SchemaRegistryDecoder } from './schemaRegistry.js';

// The ingress's options and its commit observer's report: types only, so
// that every part of the ingress (kafkaIngress.ts and the files it composes)
// reads them without importing the component.

export interface KafkaIngressOptions {
  brokers: string[];
  clientId?: string;
  /** TLS and SASL for managed Kafka (kafkajs's own option shapes; built by config.ts). */
  ssl?: KafkaConfig['ssl'];
  sasl?: KafkaConfig['sasl'];
  groupId: string;
  topics: TopicMapping[];
  /** QUEEN_INGRESS_TOPICS's /regex/ entries: the topics they match are added at start and at each refresh (matchTopicPatterns). */
  topicPatterns?: TopicPattern[];
  /** How often the patterns are matched again while running; a new match resubscribes the consumer. 0 or absent: only at start. */
  topicRefreshMs?: number;
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
  /** Keep each record's topic, partition, offset, timestamp and headers with its message (default true; QUEEN_INGRESS_KEEP_ORIGIN). */
  keepOrigin?: boolean;
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
  /**
   * kafkajs consumer options passed through (QUEEN_KAFKA_CONSUMER, validated
   * by config/consumerSettings.ts), for those without an option above; the
   * options above win where both name one.
   */
  consumer?: Omit<KafkaConsumerSettings, 'sessionTimeout' | 'heartbeatInterval' | 'maxBytesPerPartition' | 'maxWaitTimeInMs'>;
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
