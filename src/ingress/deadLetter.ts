import { Partitioners, type Kafka, type Producer, type IHeaders } from 'kafkajs';
import { QueenError } from '../errors.js';
import { Component } from '../util/lifecycle.js';
import type { KafkaRecord } from './recordMapping.js';
import { UNDECODABLE_HEADER } from './codecs.js';

export interface DeadLetter {
  topic: string;
  partition: number;
  record: KafkaRecord;
  reason: string;
  /** What kind of failure (Kafka Connect's exception class header): ValidationError, RejectedByLog, UndecodableBatchError. */
  errorClass?: string;
}

/** Kafka Connect's dead-letter context headers (errors.deadletterqueue.context.headers.enable=true). */
export const CONNECT_HEADERS = {
  topic: '__connect.errors.topic',
  partition: '__connect.errors.partition',
  offset: '__connect.errors.offset',
  exceptionClass: '__connect.errors.exception.class.name',
  exceptionMessage: '__connect.errors.exception.message',
  timestamp: '__connect.errors.timestamp',
} as const;

/**
 * Writes records the log cannot accept to `<topic><suffix>` (or the topic's
 * own dead-letter topic, `topic:queue:dlq` in QUEEN_INGRESS_TOPICS) with the
 * reason and the original coordinates in headers, keeping key, value and the
 * original headers. Headers follow Kafka Connect's convention
 * (`__connect.errors.*`, so tools written for Connect's DLQs read ours) and
 * keep our own `queen-dlq-*` ones. A send resolves only when the broker acknowledged it
 * (acks = all); only then may the ingress commit past the record.
 *
 * States: Component lifecycle; the producer connects in start().
 */
export class DeadLetterProducer extends Component {
  private readonly producer: Producer;

  constructor(
    kafka: Kafka,
    private readonly suffix: string,
    /** Per-topic dead-letter topic overriding `<topic><suffix>`. */
    private readonly overrides: ReadonlyMap<string, string> = new Map(),
  ) {
    super('DeadLetterProducer');
    // The Java client's murmur2 partitioner, so a key lands where Java producers put it.
    this.producer = kafka.producer({
      allowAutoTopicCreation: true,
      idempotent: false,
      maxInFlightRequests: 5,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
  }

  topicFor(topic: string): string {
    return this.overrides.get(topic) ?? `${topic}${this.suffix}`;
  }

  protected async onStart(): Promise<void> {
    await this.producer.connect();
  }

  protected async onStop(): Promise<void> {
    await this.producer.disconnect();
  }

  async send(letters: readonly DeadLetter[]): Promise<void> {
    this.assertRunning();
    if (letters.length === 0) return;
    const byTopic = new Map<string, { key: Buffer | null; value: Buffer | null; headers: IHeaders }[]>();
    const now = Date.now();
    for (const l of letters) {
      const headers: IHeaders = {};
      for (const [k, v] of Object.entries(l.record.headers ?? {})) if (v !== undefined && k !== UNDECODABLE_HEADER) headers[k] = v;
      headers[CONNECT_HEADERS.topic] = l.topic;
      headers[CONNECT_HEADERS.partition] = String(l.partition);
      headers[CONNECT_HEADERS.offset] = l.record.offset;
      headers[CONNECT_HEADERS.exceptionClass] = l.errorClass ?? 'ValidationError';
      headers[CONNECT_HEADERS.exceptionMessage] = l.reason;
      headers[CONNECT_HEADERS.timestamp] = String(now);
      headers['queen-dlq-reason'] = l.reason;
      headers['queen-dlq-topic'] = l.topic;
      headers['queen-dlq-partition'] = String(l.partition);
      headers['queen-dlq-offset'] = l.record.offset;
      const topic = this.topicFor(l.topic);
      if (!byTopic.has(topic)) byTopic.set(topic, []);
      byTopic.get(topic)!.push({ key: l.record.key, value: l.record.value, headers });
    }
    try {
      await this.producer.sendBatch({ acks: -1, topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })) });
    } catch (err) {
      throw new QueenError(`dead-letter write failed: ${(err as Error).message}`, { retriable: true, cause: err });
    }
  }
}
