import { ConfigError } from './errors.js';

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
  timersEnabled: true,
  timerPollMs: 100,
  timerBatch: 1000,
} as const;

export interface TopicMapping {
  topic: string;
  queue: string;
}

export interface Config {
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
  timersEnabled: boolean;
  timerPollMs: number;
  timerBatch: number;
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

/** `topic` or `topic:queue`, comma separated. */
export function parseTopics(raw: string | undefined, name = 'QUEEN_INGRESS_TOPICS'): TopicMapping[] {
  if (raw === undefined || raw.trim() === '') return [];
  const out: TopicMapping[] = [];
  const seen = new Set<string>();
  for (const part of raw.split(',')) {
    const entry = part.trim();
    if (!entry) continue;
    const [topic, queue, extra] = entry.split(':');
    if (extra !== undefined || !topic || !TOPIC_NAME.test(topic) || (queue !== undefined && !queue)) {
      throw new ConfigError(`${name} entries must be "topic" or "topic:queue" with topic matching ${TOPIC_NAME}, got "${entry}"`);
    }
    if (seen.has(topic)) throw new ConfigError(`${name} names topic "${topic}" twice`);
    seen.add(topic);
    out.push({ topic, queue: queue ?? topic });
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
    timersEnabled: bool(env, 'QUEEN_TIMERS', DEFAULTS.timersEnabled),
    timerPollMs: int(env, 'QUEEN_TIMER_POLL_MS', DEFAULTS.timerPollMs, 10, 60_000),
    timerBatch: int(env, 'QUEEN_TIMER_BATCH', DEFAULTS.timerBatch, 1, 10_000),
  };
  if (cfg.dlqSuffix === '' || !/^[A-Za-z0-9._-]+$/.test(cfg.dlqSuffix)) {
    throw new ConfigError(`QUEEN_DLQ_SUFFIX must be non-empty and match [A-Za-z0-9._-]+, got "${cfg.dlqSuffix}"`);
  }
  if (cfg.bundleMaxBytes < cfg.maxPayloadBytes) {
    throw new ConfigError(`QUEEN_BUNDLE_MAX_BYTES (${cfg.bundleMaxBytes}) must be at least QUEEN_MAX_PAYLOAD_BYTES (${cfg.maxPayloadBytes})`);
  }
  if (cfg.ingressTopics.length > 0 && cfg.kafkaBrokers.length === 0) {
    throw new ConfigError('QUEEN_INGRESS_TOPICS is set but KAFKA_BROKERS is empty: name the brokers to consume from');
  }
  return cfg;
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
