import kafkajs, { type Admin, type Kafka, type Producer, type IHeaders, type Message } from 'kafkajs';
import { QueenError } from '../errors.js';
import { Component } from '../util/lifecycle.js';
import type { ErrorStage, HeaderValue, KafkaRecord } from './recordMapping.js';
import { UNDECODABLE_HEADER } from './codecs.js';
import { allowNullHeaderValues } from './nullHeaderValues.js';

// kafkajs is CommonJS; these are not named ESM exports.
const { ConfigResourceTypes, Partitioners } = kafkajs;

export interface DeadLetter {
  topic: string;
  partition: number;
  record: KafkaRecord;
  reason: string;
  /** What kind of failure (Connect's exception class header): ValidationError, RejectedByLog, UndecodableBatchError. */
  errorClass: string;
  /** Where it failed (Connect's stage header). */
  stage: ErrorStage;
  /** What decided it (Connect's executing class header). */
  className: string;
}

/**
 * Kafka Connect's dead-letter context headers, all of them
 * (errors.deadletterqueue.context.headers.enable=true; the names are those
 * of Connect's DeadLetterQueueReporter), so tools written for Connect's
 * dead-letter queues read ours unchanged.
 */
export const CONNECT_HEADERS = {
  topic: '__connect.errors.topic',
  partition: '__connect.errors.partition',
  offset: '__connect.errors.offset',
  connectorName: '__connect.errors.connector.name',
  taskId: '__connect.errors.task.id',
  stage: '__connect.errors.stage',
  className: '__connect.errors.class.name',
  exceptionClass: '__connect.errors.exception.class.name',
  exceptionMessage: '__connect.errors.exception.message',
  exceptionStacktrace: '__connect.errors.exception.stacktrace',
} as const;

/** Our own headers (kept from before Connect's were complete; docs/kafka-ingress.md lists them). */
export const QUEEN_HEADERS = {
  reason: 'queen-dlq-reason',
  topic: 'queen-dlq-topic',
  partition: 'queen-dlq-partition',
  offset: 'queen-dlq-offset',
  /** ms since the epoch when the record was dead-lettered. */
  deadLetteredAt: 'queen-dlq-timestamp',
  /** The original record's timestamp (ms since the epoch); also the dead letter's own timestamp, as in Connect. */
  originalTimestamp: 'queen-dlq-original-timestamp',
  /** Which parts were cut to fit the dead-letter topic's max.message.bytes: value, key, headers, stacktrace. */
  truncated: 'queen-dlq-truncated',
  originalValueBytes: 'queen-dlq-original-value-bytes',
  originalKeyBytes: 'queen-dlq-original-key-bytes',
  originalHeadersBytes: 'queen-dlq-original-headers-bytes',
} as const;

/**
 * The broker's default message.max.bytes is 1048588. Used while a topic's own
 * max.message.bytes is unknown (the admin lookup failed): below the default,
 * so a dead letter cut to it fits a default broker.
 */
export const FALLBACK_MAX_MESSAGE_BYTES = 1_000_000;

/**
 * A record batch's size as the broker checks it against max.message.bytes:
 * the batch header (61 bytes) plus each record; each varint is counted at its
 * widest (5 bytes, 10 for the timestamp delta), so the estimate is never low.
 */
const BATCH_OVERHEAD = 61;
const RECORD_OVERHEAD = 5 + 1 + 10 + 5; // length, attributes, timestamp delta, offset delta
const VARINT = 5;
/** Room kept for the truncation headers themselves when cutting. */
const TRUNCATION_HEADERS_ROOM = 256;
const MIN_MESSAGE_CHARS = 256;
/** Longest a max.message.bytes lookup may take before the last known limit is used. */
const LIMIT_LOOKUP_TIMEOUT_MS = 5_000;

/** A dead-letter write failed; `remaining` were not written (those before them were, with acks=all). */
export class DeadLetterWriteError extends QueenError {
  constructor(
    message: string,
    readonly remaining: DeadLetter[],
    readonly dlqTopic: string,
    cause: unknown,
  ) {
    super(message, { retriable: true, cause });
  }
}

/**
 * Writes records the log cannot accept to `<topic><suffix>` (or the topic's
 * own dead-letter topic, `topic:queue:dlq` in QUEEN_INGRESS_TOPICS), keeping
 * key, value and every original header (a null header value stays null),
 * with Connect's context headers and our `queen-dlq-*` ones. The dead letter's
 * timestamp is the original record's, as in Connect.
 *
 * A dead letter must fit the dead-letter topic's max.message.bytes, or the
 * broker refuses it for ever: a record the log refused for its size is just
 * such a record (a compressed batch fetched small, its copy sent
 * uncompressed). So each topic's limit is read from the broker (admin
 * DescribeConfigs, at start and again after any failed write, which is how a
 * raised limit is seen) and a copy over it is cut: the value first, then the
 * key, then the original headers, then the stack trace, saying so in headers
 * with the original sizes. Letters go in sends whose estimated batch stays
 * under the limit.
 *
 * A send resolves only when the broker acknowledged it (acks = all); only
 * then may the ingress commit past the record. A failed send throws
 * DeadLetterWriteError naming what is still unwritten.
 *
 * States: Component lifecycle; the producer and the admin client connect in start().
 */
export class DeadLetterProducer extends Component {
  private readonly producer: Producer;
  private readonly admin: Admin;
  private readonly limits = new Map<string, number>();

  constructor(
    kafka: Kafka,
    private readonly suffix: string,
    /** Per-topic dead-letter topic overriding `<topic><suffix>`. */
    private readonly overrides: ReadonlyMap<string, string> = new Map(),
    /** Connect's connector name header: the consumer group, which names this ingress the way a connector names its tasks' work. */
    private readonly connectorName = 'queen-ingress',
  ) {
    super('DeadLetterProducer');
    allowNullHeaderValues();
    // The Java client's murmur2 partitioner, so a key lands where Java producers put it.
    this.producer = kafka.producer({
      allowAutoTopicCreation: true,
      idempotent: false,
      maxInFlightRequests: 5,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    this.admin = kafka.admin();
  }

  topicFor(topic: string): string {
    return this.overrides.get(topic) ?? `${topic}${this.suffix}`;
  }

  /** The max.message.bytes in force for a dead-letter topic, as last read. */
  maxMessageBytes(dlqTopic: string): number {
    return this.limits.get(dlqTopic) ?? FALLBACK_MAX_MESSAGE_BYTES;
  }

  protected async onStart(): Promise<void> {
    await this.producer.connect();
    await this.admin.connect();
  }

  protected async onStop(): Promise<void> {
    await this.producer.disconnect();
    await this.admin.disconnect();
  }

  /**
   * Reads max.message.bytes of the given dead-letter topics from the broker.
   * A topic that cannot be described (not created yet, no permission) keeps
   * its last known limit, or the fallback.
   */
  async refreshLimits(dlqTopics: Iterable<string>): Promise<void> {
    for (const name of new Set(dlqTopics)) {
      try {
        const describe = this.admin.describeConfigs({
          resources: [{ type: ConfigResourceTypes.TOPIC, name, configNames: ['max.message.bytes'] }],
          includeSynonyms: false,
        });
        // Bounded: against an unreachable broker kafkajs's own retries take tens of seconds, and a retry loop (or a shutdown) waits for this.
        describe.catch(() => undefined);
        let timer: NodeJS.Timeout | undefined;
        const r = await Promise.race([
          describe,
          new Promise<never>(
            (_, reject) => (timer = setTimeout(() => reject(new Error('DescribeConfigs timed out')), LIMIT_LOOKUP_TIMEOUT_MS)),
          ),
        ]).finally(() => clearTimeout(timer));
        const entry = r.resources[0]?.configEntries.find((e) => e.configName === 'max.message.bytes');
        const n = Number(entry?.configValue);
        if (Number.isSafeInteger(n) && n >= 0) this.limits.set(name, n);
      } catch {
        // Keep what we had: the write that follows says whether it fits.
      }
    }
  }

  async send(letters: readonly DeadLetter[]): Promise<void> {
    this.assertRunning();
    const now = Date.now();
    const byTopic = new Map<string, { letter: DeadLetter; message: Message; bytes: number }[]>();
    for (const l of letters) {
      const topic = this.topicFor(l.topic);
      const { message, bytes } = this.fit(l, now, this.maxMessageBytes(topic));
      if (!byTopic.has(topic)) byTopic.set(topic, []);
      byTopic.get(topic)!.push({ letter: l, message, bytes });
    }
    const written = new Set<DeadLetter>();
    for (const [topic, entries] of byTopic) {
      const limit = this.maxMessageBytes(topic);
      for (let i = 0; i < entries.length;) {
        // One send per group whose batch fits the limit (at least one letter each).
        let end = i + 1;
        let size = BATCH_OVERHEAD + entries[i]!.bytes;
        while (end < entries.length && size + entries[end]!.bytes <= limit) size += entries[end++]!.bytes;
        const group = entries.slice(i, end);
        try {
          await this.producer.send({ topic, acks: -1, messages: group.map((e) => e.message) });
        } catch (err) {
          const remaining = letters.filter((l) => !written.has(l));
          throw new DeadLetterWriteError(`dead-letter write to ${topic} failed: ${(err as Error).message}`, remaining, topic, err);
        }
        for (const e of group) written.add(e.letter);
        i = end;
      }
    }
  }

  /** The dead letter for `l`, cut to fit `limit` when it must be, and its estimated size in a batch. */
  private fit(l: DeadLetter, now: number, limit: number): { message: Message; bytes: number } {
    const rec = l.record;
    const original: IHeaders = {};
    for (const [k, v] of Object.entries(rec.headers ?? {}))
      if (v !== undefined && k !== UNDECODABLE_HEADER) original[k] = v as IHeaders[string];
    const ts = Number(rec.timestamp);
    // A future timestamp past the broker's message.timestamp.after.max.ms would be refused: then the broker stamps it.
    const keepTimestamp = Number.isSafeInteger(ts) && ts >= 0 && ts <= now + 60_000;
    const context: IHeaders = {
      [CONNECT_HEADERS.topic]: l.topic,
      [CONNECT_HEADERS.partition]: String(l.partition),
      [CONNECT_HEADERS.offset]: rec.offset,
      [CONNECT_HEADERS.connectorName]: this.connectorName,
      // One consumer per instance: Connect's task 0.
      [CONNECT_HEADERS.taskId]: '0',
      [CONNECT_HEADERS.stage]: l.stage,
      [CONNECT_HEADERS.className]: l.className,
      [CONNECT_HEADERS.exceptionClass]: l.errorClass,
      [CONNECT_HEADERS.exceptionMessage]: l.reason,
      [CONNECT_HEADERS.exceptionStacktrace]: `${l.errorClass}: ${l.reason}\n\tat ${l.className} (${l.stage})`,
      [QUEEN_HEADERS.reason]: l.reason,
      [QUEEN_HEADERS.topic]: l.topic,
      [QUEEN_HEADERS.partition]: String(l.partition),
      [QUEEN_HEADERS.offset]: rec.offset,
      [QUEEN_HEADERS.deadLetteredAt]: String(now),
      ...(Number.isSafeInteger(ts) && ts >= 0 ? { [QUEEN_HEADERS.originalTimestamp]: String(ts) } : {}),
    };
    let key: Buffer | null = rec.key;
    let value: Buffer | null = rec.value;
    let kept = original;
    const size = () => RECORD_OVERHEAD + bytesOf(key) + bytesOf(value) + headersBytes(kept) + headersBytes(context);
    const cut: string[] = [];
    const room = limit - BATCH_OVERHEAD;
    if (size() > room) {
      const over = () => size() + TRUNCATION_HEADERS_ROOM - room;
      const truncation: IHeaders = {};
      if (value && value.length > 0) {
        truncation[QUEEN_HEADERS.originalValueBytes] = String(value.length);
        value = value.subarray(0, Math.max(0, value.length - over()));
        cut.push('value');
      }
      if (over() > 0 && key && key.length > 0) {
        truncation[QUEEN_HEADERS.originalKeyBytes] = String(key.length);
        key = key.subarray(0, Math.max(0, key.length - over()));
        cut.push('key');
      }
      if (over() > 0 && Object.keys(kept).length > 0) {
        truncation[QUEEN_HEADERS.originalHeadersBytes] = String(headersBytes(kept));
        kept = {};
        cut.push('headers');
      }
      if (over() > 0) {
        context[CONNECT_HEADERS.exceptionStacktrace] = '';
        const message = l.reason.slice(0, MIN_MESSAGE_CHARS);
        context[CONNECT_HEADERS.exceptionMessage] = message;
        context[QUEEN_HEADERS.reason] = message;
        cut.push('stacktrace');
      }
      // Still over: sent as it is, and the broker's refusal halts the partition visibly.
      truncation[QUEEN_HEADERS.truncated] = cut.join(',');
      Object.assign(context, truncation);
    }
    const message: Message = {
      key,
      value,
      headers: { ...kept, ...context },
      ...(keepTimestamp ? { timestamp: String(ts) } : {}),
    };
    return { message, bytes: size() };
  }
}

function bytesOf(b: Buffer | string | null | undefined): number {
  if (b === null || b === undefined) return VARINT;
  return VARINT + (typeof b === 'string' ? Buffer.byteLength(b) : b.length);
}

function headersBytes(h: IHeaders): number {
  let n = VARINT;
  for (const [k, v] of Object.entries(h)) {
    const values: (HeaderValue | undefined)[] = Array.isArray(v) ? v : [v];
    for (const one of values) n += bytesOf(k) + bytesOf(one);
  }
  return n;
}
