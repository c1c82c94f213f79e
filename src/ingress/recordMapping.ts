import type { PushItem } from '../engine/writer.js';
import { LIMITS } from '../engine/limits.js';

/** A header value as kafkajs decodes it: Kafka allows a null value, and a repeated name gives an array. */
export type HeaderValue = Buffer | string | null;

/** The parts of a Kafka record the mapping reads (kafkajs's KafkaMessage shape). */
export interface KafkaRecord {
  key: Buffer | null;
  value: Buffer | null;
  offset: string;
  /** ms since the epoch, as a decimal string (kafkajs); absent in hand-made records. */
  timestamp?: string;
  headers?: Record<string, HeaderValue | HeaderValue[] | undefined>;
}

/**
 * What a record without a transactionId (no `transactionId` header, no
 * string `transactionId` field in a JSON object value) becomes:
 *   dlq     dead-lettered with the reason (default): nothing is stored under
 *           an id the producer never chose, so a producer's retry can never
 *           be stored twice unnoticed;
 *   fail    its partition halts visibly (readiness, metric, log), like
 *           QUEEN_INGRESS_ERRORS_TOLERANCE=none;
 *   offset  `topic/partition/offset`: a redelivery or a replay from earliest
 *           is a duplicate, but a re-send of the same event as a new Kafka
 *           record is not. Only when chosen.
 */
export type MissingIdPolicy = 'dlq' | 'fail' | 'offset';

export interface MappingOptions {
  missingId: MissingIdPolicy;
}

/**
 * Kafka Connect's names for where in the pipeline a record failed
 * (`__connect.errors.stage`): which part of the record the mapping could not
 * read, the log refusing it (TASK_PUT), or the batch not decoding at all.
 */
export type ErrorStage = 'KEY_CONVERTER' | 'VALUE_CONVERTER' | 'HEADER_CONVERTER' | 'TRANSFORMATION' | 'TASK_PUT' | 'KAFKA_CONSUME';

export type Mapped =
  | { ok: true; item: PushItem }
  /** halt: the record must stop its partition (missing id under `fail`) instead of being dead-lettered. */
  | { ok: false; reason: string; stage: ErrorStage; halt: boolean };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The first value of a header as a string; a null value (Kafka allows it) reads as absent. Throws on bad UTF-8. */
function headerString(headers: KafkaRecord['headers'], name: string): string | undefined {
  const v = headers?.[name];
  if (v === undefined || v === null) return undefined;
  const one = Array.isArray(v) ? v[0] : v;
  if (one === undefined || one === null) return undefined;
  return typeof one === 'string' ? one : utf8.decode(one);
}

/**
 * Kafka record -> log item (documented in docs/kafka-ingress.md):
 *   queue          the topic's mapped queue
 *   partition      the record key as UTF-8; a null key -> "Default". Kafka's
 *                  key partitioner keeps one key on one Kafka partition, hence
 *                  one consumer instance, so that instance's cache stays vouching.
 *   transactionId  the `transactionId` header; else a string `transactionId`
 *                  field of a JSON object value; else the missing-id policy
 *                  (dlq, fail, or topic/partition/offset where chosen).
 *   payload        the value bytes as they are; a Confluent-framed JSON value
 *                  (magic byte 0, 4-byte schema id) without its 5-byte header.
 *   traceContext   `traceparent` (+ ";" + `tracestate`) headers.
 * Records the mapping cannot turn into an item are rejected with a reason
 * (dead-lettered, or a halt); everything else the engine judges. Never
 * throws, whatever the record holds.
 */
export function mapRecord(topic: string, queue: string, kafkaPartition: number, rec: KafkaRecord, opts: MappingOptions): Mapped {
  const reject = (reason: string, stage: ErrorStage, halt = false): Mapped => ({ ok: false, reason, stage, halt });
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- kafkajs types say Buffer | null; undefined is guarded too, as the mapping's contract is no throw on any record
  if (rec.value === null || rec.value === undefined)
    return reject('record value is null (a tombstone carries no message)', 'VALUE_CONVERTER');
  let partition: string = LIMITS.defaultPartition;
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- kafkajs types say Buffer | null; undefined is guarded too, as the mapping's contract is no throw on any record
  if (rec.key !== null && rec.key !== undefined) {
    try {
      partition = utf8.decode(rec.key);
    } catch {
      return reject('record key is not valid UTF-8', 'KEY_CONVERTER');
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
    return reject('a transactionId/traceparent/tracestate header is not valid UTF-8', 'HEADER_CONVERTER');
  }
  const value = readValue(rec.value);
  if (!value.ok) return reject(value.reason, 'VALUE_CONVERTER');
  transactionId ??= value.transactionId;
  if (transactionId === undefined) {
    if (opts.missingId === 'offset') transactionId = `${topic}/${kafkaPartition}/${rec.offset}`;
    else
      return reject(
        `no transactionId: no transactionId header and no string transactionId field in a JSON object value (QUEEN_INGRESS_MISSING_ID=${opts.missingId})`,
        'TRANSFORMATION',
        opts.missingId === 'fail',
      );
  }
  return { ok: true, item: { queue, partition, transactionId, payload: value.payload, traceContext } };
}

/**
 * Confluent's wire format: magic byte 0, a 4-byte big-endian schema id, then
 * the serialized value. JSON text never starts with a 0 byte, so a value that
 * does is taken as framed. Without a schema registry only a JSON Schema value
 * can be read (its payload is JSON text); Avro and Protobuf payloads are
 * binary and are refused with a reason, never stored under a made-up id.
 */
const FRAME_HEADER = 5;

type ValueRead = { ok: true; payload: Buffer; transactionId: string | undefined } | { ok: false; reason: string };

function readValue(value: Buffer): ValueRead {
  if (value.length >= FRAME_HEADER && value[0] === 0) {
    const schemaId = value.readUInt32BE(1);
    const body = value.subarray(FRAME_HEADER);
    const parsed = parseJson(body);
    if (!parsed.ok)
      return {
        ok: false,
        reason: `Confluent-framed value (schema id ${schemaId}) is not JSON: an Avro or Protobuf value needs a schema registry, and none is configured`,
      };
    return { ok: true, payload: body, transactionId: idField(parsed.value) };
  }
  // Only a JSON object can carry the field; skip the parse for anything else.
  if (value[firstNonSpace(value)] !== 0x7b /* { */) return { ok: true, payload: value, transactionId: undefined };
  const parsed = parseJson(value);
  return { ok: true, payload: value, transactionId: parsed.ok ? idField(parsed.value) : undefined };
}

function firstNonSpace(b: Buffer): number {
  let i = 0;
  while (i < b.length && (b[i] === 0x20 || b[i] === 0x0a || b[i] === 0x0d || b[i] === 0x09)) i++;
  return i;
}

function parseJson(b: Buffer): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(utf8.decode(b)) as unknown };
  } catch {
    return { ok: false };
  }
}

function idField(parsed: unknown): string | undefined {
  if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
    const t = (parsed as Record<string, unknown>).transactionId;
    if (typeof t === 'string' && t.length > 0) return t;
  }
  return undefined;
}
