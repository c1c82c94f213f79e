import type { PushItem } from '../engine/writer.js';
import { LIMITS } from '../engine/limits.js';

/** The parts of a Kafka record the mapping reads (kafkajs's KafkaMessage shape). */
export interface KafkaRecord {
  key: Buffer | null;
  value: Buffer | null;
  offset: string;
  headers?: Record<string, Buffer | string | (Buffer | string)[] | undefined>;
}

export type Mapped = { ok: true; item: PushItem } | { ok: false; reason: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

function headerString(headers: KafkaRecord['headers'], name: string): string | undefined {
  const v = headers?.[name];
  if (v === undefined) return undefined;
  const one = Array.isArray(v) ? v[0] : v;
  if (one === undefined) return undefined;
  return typeof one === 'string' ? one : utf8.decode(one);
}

/**
 * Kafka record -> log item (documented in docs/kafka-ingress.md):
 *   queue          the topic's mapped queue
 *   partition      the record key as UTF-8; a null key -> "Default". Kafka's
 *                  key partitioner keeps one key on one Kafka partition, hence
 *                  one consumer instance, so that instance's cache stays vouching.
 *   transactionId  the `transactionId` header; else a string `transactionId`
 *                  field of a JSON object value; else "topic/partition/offset",
 *                  so a redelivery or a replay from earliest is a duplicate.
 *   payload        the value bytes as they are.
 *   traceContext   `traceparent` (+ ";" + `tracestate`) headers.
 * Records the mapping cannot turn into an item are rejected with a reason
 * (dead-lettered); everything else the engine judges.
 */
export function mapRecord(topic: string, queue: string, kafkaPartition: number, rec: KafkaRecord): Mapped {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- kafkajs types say Buffer | null; undefined is guarded too, as the mapping's contract is no throw on any record
  if (rec.value === null || rec.value === undefined) return { ok: false, reason: 'record value is null (a tombstone carries no message)' };
  let partition: string = LIMITS.defaultPartition;
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- kafkajs types say Buffer | null; undefined is guarded too, as the mapping's contract is no throw on any record
  if (rec.key !== null && rec.key !== undefined) {
    try {
      partition = utf8.decode(rec.key);
    } catch {
      return { ok: false, reason: 'record key is not valid UTF-8' };
    }
  }
  let transactionId: string | undefined;
  let traceContext: string | undefined;
  try {
    transactionId = headerString(rec.headers, 'transactionId');
    const traceparent = headerString(rec.headers, 'traceparent');
    if (traceparent) {
      const tracestate = headerString(rec.headers, 'tracestate');
      traceContext = tracestate ? `${traceparent};${tracestate}` : traceparent;
    }
  } catch {
    return { ok: false, reason: 'a transactionId/traceparent/tracestate header is not valid UTF-8' };
  }
  transactionId ??= transactionIdFromValue(rec.value);
  transactionId ??= `${topic}/${kafkaPartition}/${rec.offset}`;
  return { ok: true, item: { queue, partition, transactionId, payload: rec.value, traceContext } };
}

function transactionIdFromValue(value: Buffer): string | undefined {
  // Only a JSON object can carry the field; skip the parse for anything else.
  let i = 0;
  while (i < value.length && (value[i] === 0x20 || value[i] === 0x0a || value[i] === 0x0d || value[i] === 0x09)) i++;
  if (value[i] !== 0x7b /* { */) return undefined;
  try {
    const parsed: unknown = JSON.parse(value.toString('utf8'));
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      const t = (parsed as Record<string, unknown>).transactionId;
      if (typeof t === 'string' && t.length > 0) return t;
    }
  } catch {
    // Not JSON: the derived id applies.
  }
  return undefined;
}
