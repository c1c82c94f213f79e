import { readFileSync } from 'node:fs';
import { ConfigError } from './errors.js';
import { availableCpus } from './util/cpus.js';

/**
 * The one place the environment is read. Every variable has a named default
 * and a validator; a bad value fails start-up with a message naming the
 * variable and its limit. Documented in README.md (keep the two in step).
 */

export const DEFAULTS = {
  httpPort: 6632,
  httpHost: '0.0.0.0',
  pgPoolSize: 10,
  dedupCacheEnabled: true,
  dedupCacheMb: 512,
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
  retentionBatchBytes: 131_072,
  retentionConcurrency: 8,
  retentionVacuumIntervalMs: 10_000,
  timersEnabled: true,
  timerPollMs: 100,
  timerBatch: 1000,
  kafkaClientId: 'queen-ingress',
  ingressErrorsTolerance: 'all',
  ingressDlqErrorsTolerance: 'none',
  ingressMissingId: 'dlq',
  ingressStuckAfterMs: 120_000,
  ingressRestartBackoffMaxMs: 30_000,
  lagIntervalMs: 15_000,
  traceSampleRatio: 1,
  traceKafkaRecords: false,
  schemaRegistryTimeoutMs: 5_000,
} as const;

/** TLS towards the brokers (KAFKA_SSL*): files are read at start-up; PEM. */
export interface KafkaTls {
  ca?: string;
  cert?: string;
  key?: string;
  rejectUnauthorized: boolean;
}

/** SASL towards the brokers (KAFKA_SASL_*). The password is never logged. */
export type KafkaSasl = { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string; password: string } & (
  { mechanism: 'plain' } | { mechanism: 'scram-sha-256' } | { mechanism: 'scram-sha-512' }
);

/**
 * A Confluent Schema Registry (QUEEN_SCHEMA_REGISTRY_*) through which framed
 * Avro, Protobuf and JSON Schema values are decoded. The password is never
 * logged, and a URL may not carry credentials (URLs get logged).
 */
export interface SchemaRegistryConfig {
  /** One or more base URLs of the same registry cluster, tried in order. */
  urls: string[];
  /** HTTP basic auth (Confluent's USER_INFO credentials source). */
  basicAuth: { user: string; password: string } | undefined;
  /** PEM CA bundle for an https registry whose certificate the system store does not trust. */
  ca: string | undefined;
  /** Longest one registry request may take before it counts as unreachable. */
  timeoutMs: number;
}

export interface TopicMapping {
  topic: string;
  queue: string;
  /** This topic's dead-letter topic (else `<topic><QUEEN_DLQ_SUFFIX>`). */
  dlq?: string;
  /** How this topic's records become log items (QUEEN_INGRESS_MAPPING; else the default mapping). */
  mapping?: RecordMappingConfig;
}

/**
 * Where a record's transactionId comes from. Sources are tried in order; the
 * first that yields a value wins. `offset` derives `topic/partition/offset`
 * and is only ever used where it is written.
 */
export type IdSource = { header: string } | { key: true } | { jsonPointer: string } | { offset: true };

/** Where a record's log partition comes from; a source that yields nothing gives `Default`. */
export type PartitionSource = { key: true } | { header: string } | { jsonPointer: string } | { constant: string };

export interface RecordMappingConfig {
  transactionId: IdSource[];
  partition: PartitionSource;
  /** When no source yields an id: dead-letter, halt the partition, or `topic/partition/offset`. */
  missingId: 'dlq' | 'fail' | 'offset';
}

/** The mapping a topic has unless QUEEN_INGRESS_MAPPING says otherwise (docs/kafka-ingress.md). */
export const DEFAULT_ID_SOURCES: readonly IdSource[] = [{ header: 'transactionId' }, { jsonPointer: '/transactionId' }];

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
  maxPayloadBytes: number;
  maxBodyBytes: number;
  bundleMaxItems: number;
  bundleMaxBytes: number;
  bundleHoldMs: number;
  maxInflightBytes: number;
  ingressTopics: TopicMapping[];
  ingressGroup: string;
  ingressConcurrency: number;
  ingressCommitEvery: number;
  ingressFromBeginning: boolean;
  kafkaSessionTimeoutMs: number;
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
  ingressStuckAfterMs: number;
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

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
  const n = Number(raw.trim());
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got ${raw}`);
  }
  return n;
}

function bool(env: Env, name: string, dflt: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'on', 'yes'].includes(v)) return true;
  if (['0', 'false', 'off', 'no'].includes(v)) return false;
  throw new ConfigError(`${name} must be one of 1, 0, true, false, on, off, got "${raw}"`);
}

function ratio(env: Env, name: string, dflt: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  const n = Number(raw.trim());
  if (!/^\s*(0|1|0?\.\d+|1\.0*)\s*$/.test(raw) || !(n >= 0 && n <= 1))
    throw new ConfigError(`${name} must be a number between 0 and 1, got "${raw}"`);
  return n;
}

function oneOf<T extends string>(env: Env, name: string, dflt: T, allowed: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL (${protocols.join(' or ')}), got an unparsable value`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return raw;
}

const TOPIC_NAME = /^[A-Za-z0-9._-]{1,249}$/;

/** RFC 6901: "" (the whole value) or "/"-separated tokens, where "~" only starts "~0" or "~1". */
const JSON_POINTER = /^(\/([^~]|~[01])*)*$/;

function parseSource(raw: unknown, where: string, kinds: readonly string[]): { kind: string; arg: string } {
  if (typeof raw !== 'string') throw new ConfigError(`${where} must be a string such as ${kinds.join(', ')}, got ${JSON.stringify(raw)}`);
  const colon = raw.indexOf(':');
  const kind = colon < 0 ? raw : raw.slice(0, colon);
  const arg = colon < 0 ? '' : raw.slice(colon + 1);
  const form = kinds.find((k) => k.split(':')[0] === kind);
  if (!form) throw new ConfigError(`${where} must be one of ${kinds.join(', ')}, got "${raw}"`);
  const needsArg = form.includes(':');
  if (needsArg !== colon >= 0 || (needsArg && arg === '')) throw new ConfigError(`${where}: "${raw}" must be written ${form}`);
  if (kind === 'json' && !JSON_POINTER.test(arg))
    throw new ConfigError(`${where}: "${arg}" is not a JSON pointer (RFC 6901: /field/0/sub, "~0" for ~, "~1" for /)`);
  return { kind, arg };
}

const ID_FORMS = ['header:<name>', 'key', 'json:<pointer>', 'offset'] as const;
const PARTITION_FORMS = ['key', 'header:<name>', 'json:<pointer>', 'constant:<name>'] as const;

/**
 * QUEEN_INGRESS_MAPPING: a JSON object from topic to its mapping, e.g.
 * {"orders":{"transactionId":["header:eventId","json:/id"],"partition":"json:/customer","missingId":"fail"}}.
 * Each field may be left out (the default mapping's). Every topic must be one
 * of QUEEN_INGRESS_TOPICS; `offset` may only be the last id source.
 */
export function parseMappings(
  raw: string | undefined,
  topics: readonly TopicMapping[],
  missingIdDefault: RecordMappingConfig['missingId'],
  name = 'QUEEN_INGRESS_MAPPING',
): Map<string, RecordMappingConfig> {
  const out = new Map<string, RecordMappingConfig>();
  if (raw === undefined || raw.trim() === '') return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new ConfigError(`${name} must be a JSON object from topic to mapping: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new ConfigError(`${name} must be a JSON object from topic to mapping`);
  const known = new Set(topics.map((t) => t.topic));
  for (const [topic, m] of Object.entries(parsed as Record<string, unknown>)) {
    const where = `${name}["${topic}"]`;
    if (!known.has(topic)) throw new ConfigError(`${where}: topic is not in QUEEN_INGRESS_TOPICS`);
    if (!m || typeof m !== 'object' || Array.isArray(m)) throw new ConfigError(`${where} must be an object`);
    const fields = m as Record<string, unknown>;
    for (const f of Object.keys(fields))
      if (!['transactionId', 'partition', 'missingId'].includes(f))
        throw new ConfigError(`${where}: unknown field "${f}" (transactionId, partition, missingId)`);
    const idsRaw =
      fields.transactionId === undefined ? undefined : Array.isArray(fields.transactionId) ? fields.transactionId : [fields.transactionId];
    if (idsRaw?.length === 0) throw new ConfigError(`${where}.transactionId must name at least one source`);
    const ids: IdSource[] = idsRaw
      ? idsRaw.map((r, i) => {
          const { kind, arg } = parseSource(r, `${where}.transactionId`, ID_FORMS);
          if (kind === 'offset' && i !== idsRaw.length - 1)
            throw new ConfigError(`${where}.transactionId: "offset" always yields, so it can only be the last source`);
          return kind === 'header'
            ? { header: arg }
            : kind === 'key'
              ? { key: true }
              : kind === 'json'
                ? { jsonPointer: arg }
                : { offset: true };
        })
      : [...DEFAULT_ID_SOURCES];
    let partition: PartitionSource = { key: true };
    if (fields.partition !== undefined) {
      const { kind, arg } = parseSource(fields.partition, `${where}.partition`, PARTITION_FORMS);
      partition =
        kind === 'header' ? { header: arg } : kind === 'key' ? { key: true } : kind === 'json' ? { jsonPointer: arg } : { constant: arg };
    }
    const missingId = fields.missingId ?? missingIdDefault;
    if (missingId !== 'dlq' && missingId !== 'fail' && missingId !== 'offset')
      throw new ConfigError(`${where}.missingId must be one of dlq, fail, offset, got ${JSON.stringify(missingId)}`);
    out.set(topic, { transactionId: ids, partition, missingId });
  }
  return out;
}

/** `topic`, `topic:queue` or `topic:queue:dlq`, comma separated. */
export function parseTopics(raw: string | undefined, name = 'QUEEN_INGRESS_TOPICS'): TopicMapping[] {
  if (raw === undefined || raw.trim() === '') return [];
  const out: TopicMapping[] = [];
  const seen = new Set<string>();
  for (const part of raw.split(',')) {
    const entry = part.trim();
    if (!entry) continue;
    const [topic, queue, dlq, extra] = entry.split(':');
    if (
      extra !== undefined ||
      !topic ||
      !TOPIC_NAME.test(topic) ||
      (queue !== undefined && !queue) ||
      (dlq !== undefined && !TOPIC_NAME.test(dlq))
    ) {
      throw new ConfigError(
        `${name} entries must be "topic", "topic:queue" or "topic:queue:dlq" with topic and dlq matching ${TOPIC_NAME}, got "${entry}"`,
      );
    }
    if (seen.has(topic)) throw new ConfigError(`${name} names topic "${topic}" twice`);
    if (dlq === topic) throw new ConfigError(`${name}: topic "${topic}" cannot be its own dead-letter topic`);
    seen.add(topic);
    out.push(dlq ? { topic, queue: queue ?? topic, dlq } : { topic, queue: queue ?? topic });
  }
  return out;
}

export function loadConfig(env: Env = process.env): Config {
  const brokers = (env.KAFKA_BROKERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const b of brokers) {
    if (!/^[^:\s]+:\d{1,5}$/.test(b)) throw new ConfigError(`KAFKA_BROKERS must be a comma-separated list of host:port, got "${b}"`);
  }
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
    maxPayloadBytes: int(env, 'QUEEN_MAX_PAYLOAD_BYTES', DEFAULTS.maxPayloadBytes, 1, 64 * 1024 * 1024),
    maxBodyBytes: int(env, 'QUEEN_MAX_BODY_BYTES', DEFAULTS.maxBodyBytes, 1024, 1024 * 1024 * 1024),
    bundleMaxItems: int(env, 'QUEEN_BUNDLE_MAX_ITEMS', DEFAULTS.bundleMaxItems, 1, 100_000),
    bundleMaxBytes: int(env, 'QUEEN_BUNDLE_MAX_BYTES', DEFAULTS.bundleMaxBytes, 1024, 512 * 1024 * 1024),
    bundleHoldMs: int(env, 'QUEEN_BUNDLE_HOLD_MS', DEFAULTS.bundleHoldMs, 0, 1000),
    maxInflightBytes: int(env, 'QUEEN_MAX_INFLIGHT_BYTES', DEFAULTS.maxInflightBytes, 1024 * 1024, 8 * 1024 * 1024 * 1024),
    ingressTopics: parseTopics(env.QUEEN_INGRESS_TOPICS),
    ingressGroup: env.QUEEN_INGRESS_GROUP?.trim() || DEFAULTS.ingressGroup,
    ingressConcurrency: int(env, 'QUEEN_INGRESS_CONCURRENCY', DEFAULTS.ingressConcurrency, 1, 1000),
    ingressCommitEvery: int(env, 'QUEEN_INGRESS_COMMIT_EVERY', DEFAULTS.ingressCommitEvery, 1, 1_000_000),
    ingressFromBeginning: bool(env, 'QUEEN_INGRESS_FROM_BEGINNING', DEFAULTS.ingressFromBeginning),
    kafkaSessionTimeoutMs: int(env, 'QUEEN_KAFKA_SESSION_TIMEOUT_MS', DEFAULTS.kafkaSessionTimeoutMs, 6_000, 300_000),
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
    ingressStuckAfterMs: int(env, 'QUEEN_INGRESS_STUCK_AFTER_MS', DEFAULTS.ingressStuckAfterMs, 1_000, 3_600_000),
    ingressRestartBackoffMaxMs: int(env, 'QUEEN_INGRESS_RESTART_BACKOFF_MAX_MS', DEFAULTS.ingressRestartBackoffMaxMs, 1_000, 600_000),
    lagIntervalMs: int(env, 'QUEEN_LAG_INTERVAL_MS', DEFAULTS.lagIntervalMs, 100, 3_600_000),
    traceSampleRatio: ratio(env, 'OTEL_TRACES_SAMPLER_ARG', DEFAULTS.traceSampleRatio),
    traceKafkaRecords: bool(env, 'QUEEN_OTEL_KAFKAJS_INSTRUMENTATION', DEFAULTS.traceKafkaRecords),
    buildCommit: env.QUEEN_BUILD_COMMIT?.trim() || undefined,
    schemaRegistry: schemaRegistry(env),
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
  const mappings = parseMappings(env.QUEEN_INGRESS_MAPPING, cfg.ingressTopics, cfg.ingressMissingId);
  cfg.ingressTopics = cfg.ingressTopics.map((t) => (mappings.has(t.topic) ? { ...t, mapping: mappings.get(t.topic)! } : t));
  if (cfg.ingressTopics.length > 0 && cfg.kafkaBrokers.length === 0) {
    throw new ConfigError('QUEEN_INGRESS_TOPICS is set but KAFKA_BROKERS is empty: name the brokers to consume from');
  }
  return cfg;
}

function readPemFile(env: Env, name: string): string | undefined {
  const path = env[name];
  if (path === undefined || path.trim() === '') return undefined;
  let text: string;
  try {
    text = readFileSync(path.trim(), 'utf8');
  } catch (err) {
    throw new ConfigError(`${name}: cannot read ${path.trim()}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (!text.includes('-----BEGIN ')) throw new ConfigError(`${name}: ${path.trim()} is not a PEM file`);
  return text;
}

/** KAFKA_SSL=true (or any KAFKA_SSL_* file) turns TLS on; the files are PEM. */
function kafkaTls(env: Env): KafkaTls | undefined {
  const ca = readPemFile(env, 'KAFKA_SSL_CA_FILE');
  const cert = readPemFile(env, 'KAFKA_SSL_CERT_FILE');
  const key = readPemFile(env, 'KAFKA_SSL_KEY_FILE');
  const on = bool(env, 'KAFKA_SSL', ca !== undefined || cert !== undefined || key !== undefined);
  if (!on) {
    if (ca || cert || key) throw new ConfigError('KAFKA_SSL=false contradicts the KAFKA_SSL_*_FILE settings');
    return undefined;
  }
  if ((cert === undefined) !== (key === undefined))
    throw new ConfigError('KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE go together (client certificate and its key)');
  return {
    ...(ca ? { ca } : {}),
    ...(cert ? { cert } : {}),
    ...(key ? { key } : {}),
    rejectUnauthorized: bool(env, 'KAFKA_SSL_REJECT_UNAUTHORIZED', true),
  };
}

function kafkaSasl(env: Env): KafkaSasl | undefined {
  const mechanism = oneOf(env, 'KAFKA_SASL_MECHANISM', '' as 'plain', ['plain', 'scram-sha-256', 'scram-sha-512'] as const);
  const username = env.KAFKA_SASL_USERNAME;
  let password = env.KAFKA_SASL_PASSWORD;
  const passwordFile = env.KAFKA_SASL_PASSWORD_FILE?.trim();
  if (passwordFile) {
    if (password) throw new ConfigError('set KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE, not both');
    try {
      password = readFileSync(passwordFile, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new ConfigError(
        `KAFKA_SASL_PASSWORD_FILE: cannot read ${passwordFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the default '' (not set) is typed 'plain' only to fit oneOf()'s signature
  if (!mechanism) {
    if (username || password)
      throw new ConfigError('KAFKA_SASL_USERNAME/PASSWORD are set but KAFKA_SASL_MECHANISM is not (plain, scram-sha-256 or scram-sha-512)');
    return undefined;
  }
  if (!username) throw new ConfigError(`KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_USERNAME`);
  if (!password) throw new ConfigError(`KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE`);
  return { mechanism, username, password };
}

/**
 * QUEEN_SCHEMA_REGISTRY_URL (comma-separated http/https base URLs), with
 * _USER and _PASSWORD or _PASSWORD_FILE for basic auth, _CA_FILE (PEM) for
 * TLS, _TIMEOUT_MS per request. No setting here echoes a password or a URL's
 * credentials into an error message.
 */
function schemaRegistry(env: Env): SchemaRegistryConfig | undefined {
  const raw = env.QUEEN_SCHEMA_REGISTRY_URL?.trim();
  const user = env.QUEEN_SCHEMA_REGISTRY_USER;
  let password = env.QUEEN_SCHEMA_REGISTRY_PASSWORD;
  const passwordFile = env.QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE?.trim();
  const ca = readPemFile(env, 'QUEEN_SCHEMA_REGISTRY_CA_FILE');
  if (!raw) {
    if (user || password || passwordFile || ca)
      throw new ConfigError('QUEEN_SCHEMA_REGISTRY_USER/PASSWORD/PASSWORD_FILE/CA_FILE are set but QUEEN_SCHEMA_REGISTRY_URL is not');
    return undefined;
  }
  const urls = raw
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  for (const u of urls) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new ConfigError('QUEEN_SCHEMA_REGISTRY_URL must be comma-separated http:// or https:// URLs, got an unparsable one');
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw new ConfigError(`QUEEN_SCHEMA_REGISTRY_URL must use http: or https:, got ${parsed.protocol}`);
    if (parsed.username || parsed.password)
      throw new ConfigError(
        `QUEEN_SCHEMA_REGISTRY_URL ${redactUrl(u)} carries credentials: set QUEEN_SCHEMA_REGISTRY_USER and QUEEN_SCHEMA_REGISTRY_PASSWORD(_FILE) instead (a URL gets logged)`,
      );
  }
  if (passwordFile) {
    if (password) throw new ConfigError('set QUEEN_SCHEMA_REGISTRY_PASSWORD or QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE, not both');
    try {
      password = readFileSync(passwordFile, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new ConfigError(
        `QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE: cannot read ${passwordFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  if (Boolean(user) !== Boolean(password))
    throw new ConfigError('QUEEN_SCHEMA_REGISTRY_USER and QUEEN_SCHEMA_REGISTRY_PASSWORD(_FILE) go together (basic auth)');
  if (user?.includes(':'))
    throw new ConfigError('QUEEN_SCHEMA_REGISTRY_USER cannot contain ":" (basic auth separates user and password with it)');
  if (ca && !urls.some((u) => u.startsWith('https:')))
    throw new ConfigError('QUEEN_SCHEMA_REGISTRY_CA_FILE is set but no QUEEN_SCHEMA_REGISTRY_URL is https');
  return {
    urls,
    basicAuth: user && password ? { user, password } : undefined,
    ca,
    timeoutMs: int(env, 'QUEEN_SCHEMA_REGISTRY_TIMEOUT_MS', DEFAULTS.schemaRegistryTimeoutMs, 100, 120_000),
  };
}

/** A connection string with its password replaced, safe to log. */
export function redactUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<unparsable url>';
  }
}
