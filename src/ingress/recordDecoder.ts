import { createRequire } from 'node:module';

/**
 * kafkajs's decoder of one record (the v2 record format inside a record
 * batch), replaced by one that returns the same object at about a third of
 * the CPU. kafkajs computes each record's offset and timestamp through its
 * BigInt-backed Long: it parses the batch's base offset and base timestamp
 * from their decimal strings again for every record, reads the timestamp
 * delta as a varlong with a BigInt operation per byte, and formats both
 * sums back to strings; it then folds the headers into an object by
 * spreading a new object per header. In a profile of the backlog drain that
 * was ~17 % of the service's CPU (docs/kafka-ingress.md, "The client").
 *
 * Same output, field for field, as kafkajs 2.2.4's
 * `protocol/recordBatch/record/v0/decoder.js` (test/unit/recordDecoder.test.ts
 * compares the two on random records):
 *   - offset and timestamp are decimal strings of the exact 64-bit sums. The
 *     base values are parsed once per batch (the batch context object is
 *     shared by its records) and summed as doubles only while every operand
 *     and the sum are safe integers; anything else (a varlong of more than 7
 *     bytes, a sum past 2^53) goes to kafkajs's own decoder for that record,
 *     so the result is exact by construction, not by range assumption.
 *   - headers: the same object, keys in first-seen order, a repeated key's
 *     values in one array. One difference, on purpose: a header named like
 *     a member of Object.prototype (`toString`, `constructor`, `__proto__`)
 *     is a plain header here, where kafkajs's `obj[key] === undefined` test
 *     read the inherited member and stored `[member, value]`.
 *
 * Installed by replacing the module's entry in the CommonJS cache before
 * kafkajs first loads the record-batch decoder that captures it (kafkajs
 * loads its fetch decoders lazily, on the first fetch response), so every
 * kafkajs consumer in the process uses it. If the batch decoder was already
 * loaded, nothing is replaced and `install` says so.
 */

interface KafkajsDecoder {
  buffer: Buffer;
  offset: number;
  readInt8(): number;
  readVarInt(): number;
  readVarIntBytes(): Buffer | null;
  readVarIntString(): string | null;
}

interface BatchContext {
  firstOffset: string;
  firstTimestamp: string;
  magicByte?: number;
  isControlBatch?: boolean;
  timestampType?: number;
  maxTimestamp?: string;
}

type HeaderValue = Buffer | null;

export interface DecodedRecord {
  magicByte: number | undefined;
  attributes: number;
  timestamp: string;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, HeaderValue | HeaderValue[]>;
  isControlRecord: boolean;
  batchContext: BatchContext;
}

export type RecordDecodeFn = (decoder: KafkajsDecoder, batchContext?: BatchContext) => DecodedRecord;

const require = createRequire(import.meta.url);
const RECORD_DECODER = 'kafkajs/src/protocol/recordBatch/record/v0/decoder.js';
const BATCH_DECODER = 'kafkajs/src/protocol/recordBatch/v0/decoder.js';
/** kafkajs's TimestampTypes.LOG_APPEND_TIME. */
const LOG_APPEND_TIME = 1;

/** 7 varint bytes carry 49 bits: the most a double adds up exactly here. */
const MAX_FAST_VARLONG_BYTES = 7;

// The batch whose base values were parsed last: records arrive batch by
// batch, each batch's records sharing one context object.
let lastContext: BatchContext | undefined;
let baseOffset = NaN;
let baseTimestamp = NaN;

function parseBase(s: string): number {
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : NaN;
}

/**
 * The zigzag varlong at the decoder's offset as a double, or NaN (offset
 * unchanged) when it has more than 7 bytes.
 */
function readSmallVarLong(d: KafkajsDecoder): number {
  const buf = d.buffer;
  let at = d.offset;
  let n = 0;
  let scale = 1;
  for (let i = 0; i < MAX_FAST_VARLONG_BYTES; i++) {
    const b = buf[at++];
    if (b === undefined) return NaN;
    n += (b & 0x7f) * scale;
    if (b < 0x80) {
      d.offset = at;
      // Zigzag: even -> n / 2, odd -> -(n + 1) / 2.
      return n % 2 === 0 ? n / 2 : -(n + 1) / 2;
    }
    scale *= 128;
  }
  return NaN;
}

/**
 * Header names seen so far, as bytes and as their string: a producer sends
 * the same few names (transactionId, traceparent, ...) on every record, and
 * decoding each one again made a new string per header per record. Bounded
 * in count and length, filled first come first kept, so hostile names cost
 * at most a short scan. A hit returns the string the same bytes decoded to,
 * so the result is what decoding would give (invalid UTF-8 included).
 */
const NAMES_MAX = 32;
const NAME_MAX_BYTES = 64;
const nameBytes: Buffer[] = [];
const nameStrings: string[] = [];

function sameBytes(buf: Buffer, at: number, len: number, known: Buffer): boolean {
  if (known.length !== len) return false;
  for (let i = 0; i < len; i++) if (buf[at + i] !== known[i]) return false;
  return true;
}

/** kafkajs's readVarIntString for a header name, without a slice and, for a name seen before, without a new string. */
function readHeaderName(d: KafkajsDecoder): string | null {
  const start = d.offset;
  const len = d.readVarInt();
  const buf = d.buffer;
  const at = d.offset;
  if (len < 0 || at + len > buf.length) {
    // Null (-1) and malformed lengths: kafkajs's own reading, byte for byte.
    d.offset = start;
    return d.readVarIntString();
  }
  d.offset = at + len;
  for (let i = 0; i < nameBytes.length; i++) if (sameBytes(buf, at, len, nameBytes[i]!)) return nameStrings[i]!;
  const name = buf.toString('utf8', at, at + len);
  if (nameBytes.length < NAMES_MAX && len <= NAME_MAX_BYTES) {
    nameBytes.push(Buffer.from(buf.subarray(at, at + len)));
    nameStrings.push(name);
  }
  return name;
}

/** obj[key] as kafkajs folds repeats: a value, then an array of the values in order. */
function addHeader(obj: Record<string, HeaderValue | HeaderValue[]>, key: string, value: HeaderValue): void {
  if (!Object.hasOwn(obj, key)) {
    if (key === '__proto__') Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
    else obj[key] = value;
    return;
  }
  const held = obj[key]!;
  if (Array.isArray(held)) held.push(value);
  else obj[key] = [held, value];
}

/** The fast decoder, falling back to `original` for a record it cannot sum exactly as doubles. */
export function makeRecordDecoder(original: RecordDecodeFn): RecordDecodeFn {
  return function decodeRecord(decoder: KafkajsDecoder, batchContext: BatchContext = {} as BatchContext): DecodedRecord {
    const start = decoder.offset;
    if (batchContext !== lastContext) {
      lastContext = batchContext;
      baseOffset = parseBase(batchContext.firstOffset);
      baseTimestamp = parseBase(batchContext.firstTimestamp);
    }
    const attributes = decoder.readInt8();
    const timestampDelta = readSmallVarLong(decoder);
    if (Number.isNaN(timestampDelta)) {
      decoder.offset = start;
      return original(decoder, batchContext);
    }
    let timestamp: string;
    if (batchContext.timestampType === LOG_APPEND_TIME && batchContext.maxTimestamp) timestamp = batchContext.maxTimestamp;
    else {
      const t = baseTimestamp + timestampDelta;
      if (!Number.isSafeInteger(t)) {
        decoder.offset = start;
        return original(decoder, batchContext);
      }
      timestamp = String(t);
    }
    const o = baseOffset + decoder.readVarInt();
    if (!Number.isSafeInteger(o)) {
      decoder.offset = start;
      return original(decoder, batchContext);
    }
    const key = decoder.readVarIntBytes();
    const value = decoder.readVarIntBytes();
    const headers: Record<string, HeaderValue | HeaderValue[]> = {};
    const count = decoder.readVarInt();
    for (let i = 0; i < count; i++) {
      // A null key (length -1) is the property "null", as kafkajs's computed key made it.
      const name = String(readHeaderName(decoder));
      addHeader(headers, name, decoder.readVarIntBytes());
    }
    return {
      magicByte: batchContext.magicByte,
      attributes,
      timestamp,
      offset: String(o),
      key,
      value,
      headers,
      isControlRecord: batchContext.isControlBatch ?? false,
      batchContext,
    };
  };
}

export type InstallOutcome = 'installed' | 'already installed' | 'too late: kafkajs already loaded its record-batch decoder';

let installed: RecordDecodeFn | undefined;

/** Puts the fast decoder in kafkajs's place (process-wide, idempotent). */
export function installRecordDecoder(): InstallOutcome {
  const recordPath = require.resolve(RECORD_DECODER);
  const cached = require.cache[recordPath];
  if (installed !== undefined && cached?.exports === installed) return 'already installed';
  if (require.cache[require.resolve(BATCH_DECODER)] !== undefined) return 'too late: kafkajs already loaded its record-batch decoder';
  const original = require(recordPath) as RecordDecodeFn;
  installed = makeRecordDecoder(original);
  require.cache[recordPath]!.exports = installed;
  return 'installed';
}
