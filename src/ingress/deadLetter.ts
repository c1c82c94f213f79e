import { Partitioners, type Kafka, type Producer, type IHeaders } from 'kafkajs';
import { QueenError } from '../errors.js';
import { Component } from '../util/lifecycle.js';
import type { KafkaRecord } from './recordMapping.js';

export interface DeadLetter {
  topic: string;
  partition: number;
  record: KafkaRecord;
  reason: string;
}

/**
 * Writes records the log cannot accept to `<topic><suffix>` with the reason
 * and the original coordinates in headers, keeping key, value and the
 * original headers. A send resolves only when the broker acknowledged it
 * (acks = all); only then may the ingress commit past the record.
 *
 * States: Component lifecycle; the producer connects in start().
 */
export class DeadLetterProducer extends Component {
  private readonly producer: Producer;

  constructor(
    kafka: Kafka,
    private readonly suffix: string,
  ) {
    super('DeadLetterProducer');
    // The Java client's murmur2 partitioner, so a key lands where Java producers put it.
    this.producer = kafka.producer({ allowAutoTopicCreation: true, idempotent: false, maxInFlightRequests: 5, createPartitioner: Partitioners.DefaultPartitioner });
  }

  topicFor(topic: string): string {
    return `${topic}${this.suffix}`;
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
    for (const l of letters) {
      const headers: IHeaders = {};
      for (const [k, v] of Object.entries(l.record.headers ?? {})) if (v !== undefined) headers[k] = v as IHeaders[string];
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
