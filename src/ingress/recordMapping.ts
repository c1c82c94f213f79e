import { DEFAULT_ID_SOURCES, type IdSource, type PartitionSource } from '../config.js';
import { originSource, type HeaderValue, type OriginSource } from '../engine/frames.js';
import type { PushItem } from '../engine/writer.js';
import { LIMITS } from '../engine/limits.js';
import type { FramedValueDecoder, Json } from './schemaRegistry.js';

export type { HeaderValue } from '../engine/frames.js';

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
  /** Where the id comes from, first yielding source wins (QUEEN_INGRESS_MAPPING); default: the transactionId header, then /transactionId. */
  transactionId?: readonly IdSource[];
  /** Where the log partition comes from; default: the key. */
  partition?: PartitionSource;
  /**
   * Decodes Confluent-framed values through a Schema Registry (QUEEN_SCHEMA_REGISTRY_URL),
   * whose schemas were fetched for the chunk before mapping (schemaRegistry.ts);
   * its JSON pointers then read the decoded record. Without one, only a framed
   * JSON Schema value is read.
   */
  registry?: FramedValueDecoder;
  /** Keep the record's topic, partition, offset, timestamp and headers as the item's origin (the service's default; absent = not kept). */
  keepOrigin?: boolean;
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
 *   partition      by default the record key as UTF-8 (Kafka's key
 *                  partitioner keeps one key on one Kafka partition, hence one
 *                  consumer instance, so that instance's cache stays
 *                  vouching); or a header, a JSON pointer into the value, a
 *                  constant. A source that yields nothing (null key, absent
 *                  header or field) gives "Default".
 *   transactionId  the first source that yields: by default the
 *                  `transactionId` header, then a `transactionId` field of a
 *                  JSON value; or a named header, the key, any JSON pointer,
 *                  the offset where chosen. None: the missing-id policy (dlq,
 *                  fail, or topic/partition/offset where chosen).
 *   payload        the value bytes as they are; a Confluent-framed value
 *                  (magic byte 0, 4-byte schema id) decoded to JSON through
 *                  the registry (JSON pointers then read the decoded record),
 *                  or without a registry a framed JSON value without its
 *                  5-byte header.
 *   traceContext   `traceparent` (+ ";" + `tracestate`) headers.
 *   origin         (keepOrigin) topic, Kafka partition, offset, timestamp
 *                  and every header as the record holds it (null values,
 *                  repeats, binary), stored in the frame and returned by pop
 *                  and browse; never part of the dedup key.
 * Records the mapping cannot turn into an item are rejected with a reason
 * (dead-lettered, or a halt); everything else the engine judges. Never
 * throws, whatever the record holds.
 */
export function mapRecord(
  topic: string,
  queue: string,
  kafkaPartition: number,
  rec: KafkaRecord,
  opts: MappingOptions,
  /** The chunk's shared origin part (keepOrigin); made here when absent. */
  source?: OriginSource,
): Mapped {
  // No closure and no value-read object per record on the common path (an
  // unframed value): this runs for every record the ingress reads.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- kafkajs types say Buffer | null; undefined is guarded too, as the mapping's contract is no throw on any record
  if (rec.value === null || rec.value === undefined)
    return reject('record value is null (a tombstone carries no message)', 'VALUE_CONVERTER');
  let payload: Buffer = rec.value;
  /** A framed value's JSON (decoded through the registry, or its JSON Schema payload), read on first use. */
  let framedJson: (() => Json) | undefined;
  if (isFramed(rec.value)) {
    const value = readFramedValue(rec.value, opts.registry);
    if (!value.ok) return reject(value.reason, 'VALUE_CONVERTER');
    payload = value.payload;
    framedJson = value.json;
  }
  let doc: Json | undefined;
  let key: string | undefined;
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- kafkajs types say Buffer | null; undefined is guarded too, as the mapping's contract is no throw on any record
  const keyBytes = rec.key === undefined ? null : rec.key;
  const partitionFrom = opts.partition ?? KEY;
  const idFrom = opts.transactionId ?? DEFAULT_ID_SOURCES;
  if (keyBytes !== null && ('key' in partitionFrom || readsKey(idFrom))) {
    try {
      key = utf8.decode(keyBytes);
    } catch {
      return reject('record key is not valid UTF-8', 'KEY_CONVERTER');
    }
  }
  let transactionId: string | undefined;
  let partition: string | undefined;
  let traceContext: string | undefined;
  try {
    for (const source of idFrom) {
      if ('header' in source) transactionId = headerString(rec.headers, source.header);
      else if ('key' in source) transactionId = key;
      else if ('jsonPointer' in source)
        transactionId = scalarAt((doc ??= framedJson ? framedJson() : valueJson(payload)), source.jsonPointer);
      else transactionId = `${topic}/${kafkaPartition}/${rec.offset}`;
      if (transactionId !== undefined) break;
    }
    if ('key' in partitionFrom) partition = key;
    else if ('header' in partitionFrom) partition = headerString(rec.headers, partitionFrom.header);
    else if ('jsonPointer' in partitionFrom)
      partition = scalarAt((doc ??= framedJson ? framedJson() : valueJson(payload)), partitionFrom.jsonPointer);
    else partition = partitionFrom.constant;
    const traceparent = headerString(rec.headers, 'traceparent');
    if (traceparent) {
      const tracestate = headerString(rec.headers, 'tracestate');
      traceContext = tracestate ? `${traceparent};${tracestate}` : traceparent;
    }
  } catch {
    return reject(
      'a mapped header is not valid UTF-8 (transactionId, traceparent, tracestate, or one QUEEN_INGRESS_MAPPING names)',
      'HEADER_CONVERTER',
    );
  }
  if (transactionId === undefined) {
    if (opts.missingId === 'offset') transactionId = `${topic}/${kafkaPartition}/${rec.offset}`;
    else
      return reject(
        `no transactionId: none of ${idFrom.map(describe).join(', ')} gave one (QUEEN_INGRESS_MISSING_ID=${opts.missingId})`,
        'TRANSFORMATION',
        opts.missingId === 'fail',
      );
  }
  const item: PushItem = { queue, partition: partition ?? LIMITS.defaultPartition, transactionId, payload, traceContext };
  // The record itself is the per-record part: nothing is copied (frames.ts writes it into the segment).
  if (opts.keepOrigin) item.origin = { source: source ?? originSource(topic, kafkaPartition), record: rec };
  return { ok: true, item };
}

const KEY: PartitionSource = { key: true };

function reject(reason: string, stage: ErrorStage, halt = false): Mapped {
  return { ok: false, reason, stage, halt };
}

function readsKey(sources: readonly IdSource[]): boolean {
  for (const s of sources) if ('key' in s) return true;
  return false;
}

function describe(s: IdSource): string {
  if ('header' in s) return `header ${s.header}`;
  if ('key' in s) return 'the key';
  if ('jsonPointer' in s) return `JSON ${s.jsonPointer}`;
  return 'the offset';
}

/**
 * The string or integer at an RFC 6901 pointer, as a string; undefined when
 * the value is not JSON, the path is absent, or what is there is anything
 * else (an empty string, an object, a fraction): no such value is an id.
 */
function scalarAt(doc: Json, pointer: string): string | undefined {
  if (!doc.ok) return undefined;
  let at: unknown = doc.value;
  if (pointer !== '') {
    for (const raw of pointer.slice(1).split('/')) {
      const token = raw.replace(/~1/g, '/').replace(/~0/g, '~');
      if (Array.isArray(at) && /^(0|[1-9]\d*)$/.test(token)) at = at[Number(token)];
      else if (at && typeof at === 'object' && !Array.isArray(at) && Object.prototype.hasOwnProperty.call(at, token))
        at = (at as Record<string, unknown>)[token];
      else return undefined;
    }
  }
  if (typeof at === 'string') return at.length > 0 ? at : undefined;
  if (typeof at === 'number' && Number.isSafeInteger(at)) return String(at);
  return undefined;
}

/**
 * Confluent's wire format: magic byte 0, a 4-byte big-endian schema id, then
 * the serialized value. JSON text never starts with a 0 byte, so a value that
 * does is taken as framed. With a registry it is decoded there (Avro,
 * Protobuf, JSON Schema alike). Without one only a JSON Schema value can be
 * read (its payload is JSON text); Avro and Protobuf payloads are binary and
 * are refused with a reason, never stored under a made-up id.
 */
const FRAME_HEADER = 5;

/** A framed value's payload to store, and its JSON (parsed once, on first use: only a JSON source needs it). */
type ValueRead = { ok: true; payload: Buffer; json: () => Json } | { ok: false; reason: string };

function isFramed(value: Buffer): boolean {
  return value.length >= FRAME_HEADER && value[0] === 0;
}

function readFramedValue(value: Buffer, registry: FramedValueDecoder | undefined): ValueRead {
  if (registry) return registry.decode(value);
  const schemaId = value.readUInt32BE(1);
  const body = value.subarray(FRAME_HEADER);
  const parsed = parseJson(body);
  if (!parsed.ok)
    return {
      ok: false,
      reason: `Confluent-framed value (schema id ${schemaId}) is not JSON: an Avro or Protobuf value needs a schema registry, and none is configured (QUEEN_SCHEMA_REGISTRY_URL)`,
    };
  return { ok: true, payload: body, json: () => parsed };
}

/** An unframed value's JSON: only a JSON object or array can hold a field, so anything else is not parsed at all. */
function valueJson(value: Buffer): Json {
  const first = value[firstNonSpace(value)];
  return first === 0x7b || first === 0x5b ? parseJson(value) : { ok: false };
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
