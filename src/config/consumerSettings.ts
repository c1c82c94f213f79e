import { ConfigError } from '../errors.js';

// QUEEN_KAFKA_CONSUMER: kafkajs consumer options passed through, validated.
// Only options whose every value keeps the ingress's guarantees are
// accepted; the ones that would break one (auto-commit, kafkajs's own
// restarts, the group) are refused with the reason, and the ones another
// setting already owns name that setting.

/** The kafkajs consumer options an operator may set (kafkajs 2.2.4's names and units). */
export interface KafkaConsumerSettings {
  sessionTimeout?: number;
  heartbeatInterval?: number;
  rebalanceTimeout?: number;
  metadataMaxAge?: number;
  maxBytesPerPartition?: number;
  minBytes?: number;
  maxBytes?: number;
  maxWaitTimeInMs?: number;
  /** false (default): read_committed, so records of aborted transactions are never stored. */
  readUncommitted?: boolean;
  maxInFlightRequests?: number;
  rackId?: string;
}

const MIB = 1024 * 1024;

/** Integer options: [least, most]. */
const INTEGERS = {
  sessionTimeout: [6_000, 300_000],
  heartbeatInterval: [100, 299_999],
  rebalanceTimeout: [6_000, 3_600_000],
  metadataMaxAge: [1_000, 86_400_000],
  maxBytesPerPartition: [1024, 1024 * MIB],
  minBytes: [1, 1024 * MIB],
  maxBytes: [1024, 1024 * MIB],
  maxWaitTimeInMs: [0, 60_000],
  maxInFlightRequests: [1, 1000],
} as const satisfies Partial<Record<keyof KafkaConsumerSettings, readonly [number, number]>>;

const BOOLEANS = ['readUncommitted'] as const;
const STRINGS = ['rackId'] as const;

/** Options that must keep one value: which, and why. */
const FIXED: Record<string, { value: unknown; why: string }> = {
  autoCommit: {
    value: false,
    why: 'offsets are committed only behind verdicts (docs/kafka-ingress.md); an automatic commit could pass a record PostgreSQL has not stored',
  },
  eachBatchAutoResolve: {
    value: false,
    why: 'a batch is resolved chunk by chunk as it joins its lane; resolving it whole would move the fetch position past records not yet queued',
  },
};

/** Options refused outright, and what to use instead. */
const REFUSED: Record<string, string> = {
  groupId: 'set QUEEN_INGRESS_GROUP',
  fromBeginning: 'set QUEEN_INGRESS_FROM_BEGINNING',
  partitionsConsumedConcurrently: 'set QUEEN_INGRESS_CONCURRENCY',
  retry:
    "the ingress's supervisor owns restarts (kafkajs must never restart a crashed consumer itself); QUEEN_INGRESS_RESTART_BACKOFF_MAX_MS bounds its backoff",
  restartOnFailure: "the ingress's supervisor owns restarts (kafkajs must never restart a crashed consumer itself)",
  autoCommitInterval: 'offsets are committed only behind verdicts, never on a timer',
  autoCommitThreshold: 'offsets are committed only behind verdicts, never by count',
  partitionAssigners: 'assigners are code, not settings',
  isolationLevel: 'kafkajs takes readUncommitted (true or false) instead',
  allowAutoTopicCreation:
    "the ingress subscribes to its topics before they need to exist and leaves creating them to the broker's auto.create.topics.enable; set that on the broker",
};

const ALLOWED = [...Object.keys(INTEGERS), ...BOOLEANS, ...STRINGS];

/**
 * Parses QUEEN_KAFKA_CONSUMER, a JSON object of kafkajs consumer options, e.g.
 * {"sessionTimeout":45000,"heartbeatInterval":3000,"maxBytesPerPartition":2097152,"readUncommitted":false}.
 * An unknown option, a value of the wrong type or out of range, and a set of
 * values that break an invariant between them each fail start-up with a
 * message naming the setting and the option. `sessionTimeoutMs` is the value
 * QUEEN_KAFKA_SESSION_TIMEOUT_MS gives when it is set (the two must agree),
 * used to check the invariants when the JSON leaves sessionTimeout out.
 */
export function parseConsumerSettings(
  raw: string | undefined,
  sessionTimeoutMs: number,
  name = 'QUEEN_KAFKA_CONSUMER',
): KafkaConsumerSettings {
  const out: KafkaConsumerSettings = {};
  if (raw === undefined || raw.trim() === '') return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new ConfigError(`${name} must be a JSON object of kafkajs consumer options: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new ConfigError(`${name} must be a JSON object of kafkajs consumer options`);
  const settings = out as Record<string, unknown>;
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    const where = `${name}.${key}`;
    const fixed = FIXED[key];
    if (fixed) {
      if (value !== fixed.value) throw new ConfigError(`${where} must stay ${JSON.stringify(fixed.value)}: ${fixed.why}`);
      continue; // the ingress sets it itself
    }
    const refused = REFUSED[key];
    if (refused !== undefined) throw new ConfigError(`${where} cannot be set here: ${refused}`);
    if (key in INTEGERS) {
      const [min, max] = INTEGERS[key as keyof typeof INTEGERS];
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max)
        throw new ConfigError(`${where} must be an integer between ${min} and ${max}, got ${JSON.stringify(value)}`);
    } else if ((BOOLEANS as readonly string[]).includes(key)) {
      if (typeof value !== 'boolean') throw new ConfigError(`${where} must be true or false, got ${JSON.stringify(value)}`);
    } else if ((STRINGS as readonly string[]).includes(key)) {
      if (typeof value !== 'string' || value.trim() === '' || value.length > 255)
        throw new ConfigError(`${where} must be a non-empty string of at most 255 characters, got ${JSON.stringify(value)}`);
    } else {
      throw new ConfigError(`${where}: unknown option (allowed: ${ALLOWED.join(', ')})`);
    }
    settings[key] = value;
  }
  const session = out.sessionTimeout ?? sessionTimeoutMs;
  // A member that does not heartbeat within a session is evicted; Kafka advises at most a third of it.
  if (out.heartbeatInterval !== undefined && out.heartbeatInterval >= session)
    throw new ConfigError(
      `${name}.heartbeatInterval (${out.heartbeatInterval}) must be below the session timeout (${session}); Kafka advises at most a third of it`,
    );
  // A member gets the rebalance timeout to rejoin; shorter than a session, a slow rejoin drops members that are alive.
  if (out.rebalanceTimeout !== undefined && out.rebalanceTimeout < session)
    throw new ConfigError(`${name}.rebalanceTimeout (${out.rebalanceTimeout}) must be at least the session timeout (${session})`);
  // kafkajs waits out a fetch before it leaves or rejoins the group: a fetch as long as a session costs membership.
  if (out.maxWaitTimeInMs !== undefined && out.maxWaitTimeInMs >= session)
    throw new ConfigError(`${name}.maxWaitTimeInMs (${out.maxWaitTimeInMs}) must be below the session timeout (${session})`);
  const maxBytes = out.maxBytes ?? 10 * MIB;
  if (out.maxBytesPerPartition !== undefined && out.maxBytesPerPartition > maxBytes)
    throw new ConfigError(
      `${name}.maxBytesPerPartition (${out.maxBytesPerPartition}) must be at most maxBytes (${maxBytes}, kafkajs's default 10 MiB when not set)`,
    );
  if (out.minBytes !== undefined && out.minBytes > maxBytes)
    throw new ConfigError(`${name}.minBytes (${out.minBytes}) must be at most maxBytes (${maxBytes})`);
  return out;
}
