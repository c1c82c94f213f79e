/**
 * Segment blob format (documented in docs/frame-format.md), version 1 or 2:
 *
 *   u8      version (1 or 2)
 *   u32 BE  frame count N
 *   N x 16  message ids (UUID bytes), frame order  <- the id directory
 *   N frames, each:
 *     u16 BE  transactionId length, then its UTF-8 bytes
 *     u16 BE  trace-context length, then its UTF-8 bytes (0 = none)
 *     u32 BE  payload length, then the payload bytes
 *     v2 only:
 *     u32 BE  origin length, then the origin section (0 = none)
 *
 * The id directory sits at a fixed position so SQL can answer a duplicate
 * with the original message's id (substring at 6 + 16 * i, 1-based) without
 * parsing frames; both versions keep it there.
 *
 * A segment is written as version 1 unless one of its frames carries an
 * origin (a Kafka record's topic, partition, offset, timestamp and headers):
 * HTTP pushes and timers stay byte-for-byte what a release that reads only
 * version 1 reads. The origin section is length-prefixed so a reader that
 * does not want it (log_read_v1 in SQL) skips it with one read.
 *
 * Origin section:
 *   u16 BE  topic length, then its UTF-8 bytes
 *   i32 BE  Kafka partition
 *   i64 BE  Kafka offset
 *   i64 BE  record timestamp, ms since the epoch (-1 = none)
 *   u16 BE  header count H
 *   H headers, in the order the record holds them:
 *     u16 BE  key length, then its UTF-8 bytes
 *     i32 BE  value length (-1 = a null value), then the value bytes
 */
import { ValidationError } from '../errors.js';

export const FRAME_FORMAT_V1 = 1;
export const FRAME_FORMAT_V2 = 2;
export const FRAME_HEADER_BYTES = 5;

/** One Kafka record header: Kafka allows a null value and repeated keys. */
export interface KafkaHeader {
  key: string;
  value: Buffer | null;
}

/** Where a message came from in Kafka: kept with it, returned by pop and browse. */
export interface KafkaOrigin {
  topic: string;
  partition: number;
  /** Kafka's int64 offset, as decimal text (kafkajs's form; exact past 2^53). */
  offset: string;
  /** The record timestamp, ms since the epoch; null when the record had none (-1). */
  timestamp: number | null;
  headers: readonly KafkaHeader[];
}

/** A header value as Kafka clients hand them over: a null value is Kafka's null; a repeated key gives an array. */
export type HeaderValue = Buffer | string | null;
/** Headers by key (kafkajs's shape): keys in first-appearance order, a key's repeats together. */
export type HeaderMap = Record<string, HeaderValue | HeaderValue[] | undefined>;

/**
 * The part of an origin every record of one Kafka topic-partition shares,
 * checked and encoded once (originSource), not per record.
 */
export interface OriginSource {
  readonly topic: string;
  readonly topicBytes: Buffer;
  readonly partition: number;
}

/** The per-record part of an origin, in kafkajs's KafkaMessage shape (the record itself is passed, nothing is copied). */
export interface OriginRecord {
  /** int64 as decimal text. */
  offset: string;
  /** ms since the epoch as decimal text; absent or negative = none. */
  timestamp?: string | undefined;
  headers?: HeaderMap | undefined;
}

/** What the writer is given to keep as a frame's origin. */
export interface FrameOrigin {
  source: OriginSource;
  record: OriginRecord;
}

export function originSource(topic: string, partition: number): OriginSource {
  const topicBytes = Buffer.from(topic, 'utf8');
  if (topicBytes.length > MAX_U16) throw new ValidationError('origin topic is over 65535 bytes', 'origin');
  if (!Number.isInteger(partition) || partition < 0 || partition > MAX_I32)
    throw new ValidationError(`origin partition ${partition} is not a Kafka partition`, 'origin');
  return { topic, topicBytes, partition };
}

/**
 * One message as packSegment writes it. The writer's own item objects are
 * frames (no copy per message): the id is 16 bytes at `idAt` of a buffer the
 * whole bundle shares, and the transactionId is written from its string
 * (`transactionIdBytes` is its UTF-8 length, measured once at validation),
 * so a Kafka record costs no Buffer object of its own here.
 */
export interface Frame {
  /** The message id: 16 bytes at idAt. */
  ids: Buffer;
  idAt: number;
  transactionId: string;
  /** Buffer.byteLength(transactionId, 'utf8'). */
  transactionIdBytes: number;
  traceContext: Buffer | undefined; // UTF-8, optional
  payload: Buffer;
  /** The Kafka origin, checked, and its section's size (originSize), optional. */
  origin?: FrameOrigin | undefined;
  originSize?: number | undefined;
}

/** A Frame for one message whose id is a 16-byte Buffer of its own (timers, tests, benches). */
export function frameOf(m: {
  id: Buffer;
  transactionId: string;
  traceContext?: Buffer | undefined;
  payload: Buffer;
  origin?: FrameOrigin | undefined;
}): Frame {
  return {
    ids: m.id,
    idAt: 0,
    transactionId: m.transactionId,
    transactionIdBytes: Buffer.byteLength(m.transactionId, 'utf8'),
    traceContext: m.traceContext,
    payload: m.payload,
    origin: m.origin,
  };
}

const MAX_U16 = 0xffff;
const MAX_I32 = 0x7fffffff;
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

/**
 * The bytes of an origin's frame section, checking that it fits: throws
 * ValidationError naming what does not (a header key over 65 535 bytes, more
 * than 65 535 headers, an offset that is not an int64), so the writer fails
 * that item alone. The writer calls it per item and packSegment writes the
 * section straight into the segment (writeOrigin).
 *
 * Both run once per Kafka record, so they allocate nothing: the record's
 * header map is walked with for-in (no key array), the topic's bytes are the
 * source's, and offsets are parsed without a RegExp or BigInt where they are
 * below 2^53 (bench/originCost.ts and a CPU profile of the ingest: the
 * object-per-header form cost ~3 µs per record, most of it GC).
 */
export function originSize(o: FrameOrigin): number {
  const r = o.record;
  if (parseInt64(r.offset) === undefined) checkBigInt64(r.offset, 'offset');
  let size = 2 + o.source.topicBytes.length + 4 + 8 + 8 + 2;
  let count = 0;
  const h = r.headers;
  if (h) {
    for (const key in h) {
      const v = h[key];
      if (v === undefined) continue;
      const keyLen = utf8Length(key);
      if (keyLen > MAX_U16) throw new ValidationError('an origin header key is over 65535 bytes', 'origin');
      if (Array.isArray(v)) {
        for (const one of v) size += 2 + keyLen + 4 + valueLength(one);
        count += v.length;
      } else {
        size += 2 + keyLen + 4 + valueLength(v);
        count++;
      }
    }
  }
  if (count > MAX_U16) throw new ValidationError(`origin has ${count} headers, over 65535`, 'origin');
  return size;
}

function valueLength(v: HeaderValue): number {
  if (v === null) return 0;
  const n = typeof v === 'string' ? Buffer.byteLength(v, 'utf8') : v.length;
  if (n > MAX_I32) throw new ValidationError('an origin header value is too long', 'origin');
  return n;
}

/**
 * A checked origin (originSize) written at `pos`; returns the position after
 * it. Integers are stored byte by byte and values with `set`: Buffer's
 * write*BE and copy are calls with argument checks, several per header.
 */
export function writeOrigin(out: Buffer, pos: number, o: FrameOrigin): number {
  const topic = o.source.topicBytes;
  out[pos] = topic.length >>> 8;
  out[pos + 1] = topic.length & 0xff;
  out.set(topic, pos + 2);
  pos += 2 + topic.length;
  pos = putU32(out, pos, o.source.partition);
  const r = o.record;
  pos = writeInt64(out, pos, parseInt64(r.offset) ?? BigInt(r.offset));
  const ts = r.timestamp === undefined ? undefined : parseInt64(r.timestamp);
  pos = writeInt64(out, pos, ts === undefined || ts < 0 ? -1 : ts);
  const countAt = pos;
  pos += 2;
  let count = 0;
  const h = r.headers;
  if (h) {
    for (const key in h) {
      const v = h[key];
      if (v === undefined) continue;
      if (Array.isArray(v)) {
        for (const one of v) pos = writeHeader(out, pos, key, one);
        count += v.length;
      } else {
        pos = writeHeader(out, pos, key, v);
        count++;
      }
    }
  }
  out[countAt] = count >>> 8;
  out[countAt + 1] = count & 0xff;
  return pos;
}

function writeHeader(out: Buffer, pos: number, key: string, v: HeaderValue): number {
  pos = writeShortString(out, pos, key);
  if (v === null) return putU32(out, pos, 0xffffffff); // -1 as int32: a null value
  if (typeof v === 'string') {
    const n = out.write(v, pos + 4, 'utf8');
    putU32(out, pos, n);
    return pos + 4 + n;
  }
  pos = putU32(out, pos, v.length);
  out.set(v, pos);
  return pos + v.length;
}

/** u32 big-endian (an int32's bits when given n >>> 0). */
function putU32(out: Buffer, pos: number, n: number): number {
  out[pos] = n >>> 24;
  out[pos + 1] = (n >>> 16) & 0xff;
  out[pos + 2] = (n >>> 8) & 0xff;
  out[pos + 3] = n & 0xff;
  return pos + 4;
}

/** An origin as its own frame section (tests, tools; the write path uses originSize + writeOrigin). */
export function encodeOrigin(o: FrameOrigin): Buffer {
  const out = Buffer.allocUnsafe(originSize(o));
  writeOrigin(out, 0, o);
  return out;
}

/*
 * Topic names and header keys are short and almost always ASCII. Native
 * Buffer.byteLength / buf.write cost a call each (~100 ns), more than a JS
 * loop over a dozen characters, and they run several times per Kafka record
 * (bench/originCost.ts), so ASCII is measured and written here and anything
 * else goes to the native calls.
 */
function utf8Length(str: string): number {
  for (let i = 0; i < str.length; i++) if (str.charCodeAt(i) > 0x7f) return Buffer.byteLength(str, 'utf8');
  return str.length;
}

/** u16 length + UTF-8 bytes of `str` (length checked by originSize). */
function writeShortString(out: Buffer, pos: number, str: string): number {
  const n = str.length;
  let i = 0;
  for (; i < n; i++) {
    const c = str.charCodeAt(i);
    if (c > 0x7f) break;
    out[pos + 2 + i] = c;
  }
  if (i === n) {
    out[pos] = n >>> 8;
    out[pos + 1] = n & 0xff;
    return pos + 2 + n;
  }
  const len = out.write(str, pos + 2, 'utf8');
  out.writeUInt16BE(len, pos);
  return pos + 2 + len;
}

const TWO_32 = 2 ** 32;

/** Decimal text as a number when it has at most 15 digits (so below 2^53), else undefined. No RegExp, no allocation. */
function parseInt64(text: string): number | undefined {
  const n = text.length;
  let i = text.charCodeAt(0) === 45 ? 1 : 0; // '-'
  if (n === i || n - i > 15) return undefined;
  let v = 0;
  for (; i < n; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    v = v * 10 + d;
  }
  return text.charCodeAt(0) === 45 ? -v : v;
}

/** Throws ValidationError unless the decimal text is an int64 (the slow path, past 15 digits or malformed). */
function checkBigInt64(text: string, what: string): void {
  let b: bigint;
  try {
    b = BigInt(text);
  } catch {
    throw new ValidationError(`origin ${what} ${JSON.stringify(text)} is not an integer`, 'origin');
  }
  if (text.trim() === '' || b < INT64_MIN || b > INT64_MAX) throw new ValidationError(`origin ${what} ${text} is not an int64`, 'origin');
}

/** An int64 at `pos`, big-endian; returns the position after it. */
function writeInt64(out: Buffer, pos: number, v: number | bigint): number {
  if (typeof v === 'bigint') return out.writeBigInt64BE(v, pos);
  // Two halves: hi = floor(v / 2^32) is exact for |v| < 2^53, and lo is what remains (two's complement for v < 0).
  const hi = Math.floor(v / TWO_32);
  putU32(out, pos, hi >>> 0);
  return putU32(out, pos + 4, v - hi * TWO_32);
}

/** The int64 at `pos`: a number when it is a safe integer (every real offset and timestamp), else via BigInt. */
function readInt64(b: Buffer, pos: number): number | bigint {
  const hi = b.readInt32BE(pos);
  const lo = b.readUInt32BE(pos + 4);
  const n = hi * TWO_32 + lo;
  return Number.isSafeInteger(n) ? n : b.readBigInt64BE(pos);
}

/** An origin section back to its fields (header values are views into `b`). Throws on a malformed section. */
export function decodeOrigin(b: Buffer): KafkaOrigin {
  let pos = 0;
  const tl = b.readUInt16BE(pos);
  pos += 2;
  const topic = b.toString('utf8', pos, pos + tl);
  pos += tl;
  const partition = b.readInt32BE(pos);
  pos += 4;
  const offset = String(readInt64(b, pos));
  pos += 8;
  const ts = readInt64(b, pos);
  pos += 8;
  const n = b.readUInt16BE(pos);
  pos += 2;
  const headers: KafkaHeader[] = [];
  for (let i = 0; i < n; i++) {
    const kl = b.readUInt16BE(pos);
    pos += 2;
    const key = b.toString('utf8', pos, pos + kl);
    pos += kl;
    const vl = b.readInt32BE(pos);
    pos += 4;
    if (vl < 0) headers.push({ key, value: null });
    else {
      if (pos + vl > b.length) throw new RangeError('origin header value runs past its section');
      headers.push({ key, value: b.subarray(pos, pos + vl) });
      pos += vl;
    }
  }
  if (pos !== b.length) throw new RangeError(`origin section has ${b.length - pos} trailing bytes`);
  return { topic, partition, offset, timestamp: ts < 0 ? null : Number(ts), headers };
}

export function packSegment(frames: readonly Frame[]): Buffer {
  const v2 = frames.some((f) => f.origin !== undefined);
  let size = FRAME_HEADER_BYTES;
  for (const f of frames) {
    size += 16 + 2 + f.transactionIdBytes + 2 + (f.traceContext?.length ?? 0) + 4 + f.payload.length;
    if (v2) size += 4 + (f.origin ? (f.originSize ?? originSize(f.origin)) : 0);
  }
  const out = Buffer.allocUnsafe(size);
  out[0] = v2 ? FRAME_FORMAT_V2 : FRAME_FORMAT_V1;
  out.writeUInt32BE(frames.length, 1);
  let pos = FRAME_HEADER_BYTES;
  for (const f of frames) {
    f.ids.copy(out, pos, f.idAt, f.idAt + 16);
    pos += 16;
  }
  for (const f of frames) {
    out.writeUInt16BE(f.transactionIdBytes, pos);
    pos += 2;
    pos += out.write(f.transactionId, pos, f.transactionIdBytes, 'utf8');
    const trace = f.traceContext;
    out.writeUInt16BE(trace?.length ?? 0, pos);
    pos += 2;
    if (trace) pos += trace.copy(out, pos);
    out.writeUInt32BE(f.payload.length, pos);
    pos += 4;
    pos += f.payload.copy(out, pos);
    if (v2) {
      const at = pos;
      pos += 4;
      if (f.origin) pos = writeOrigin(out, pos, f.origin);
      out.writeUInt32BE(pos - at - 4, at);
    }
  }
  return out;
}

export interface DecodedFrame {
  id: Buffer;
  transactionId: string;
  traceContext: string | undefined;
  payload: Buffer;
  /** The origin section, undecoded (decodeOrigin), when the frame has one. */
  origin: Buffer | undefined;
}

export function unpackSegment(blob: Buffer): DecodedFrame[] {
  const version = blob[0];
  if (blob.length < FRAME_HEADER_BYTES || (version !== FRAME_FORMAT_V1 && version !== FRAME_FORMAT_V2)) {
    throw new Error(`unknown segment format version ${version}`);
  }
  const v2 = version === FRAME_FORMAT_V2;
  const n = blob.readUInt32BE(1);
  let pos = FRAME_HEADER_BYTES + 16 * n;
  const out: DecodedFrame[] = [];
  for (let i = 0; i < n; i++) {
    const id = blob.subarray(FRAME_HEADER_BYTES + 16 * i, FRAME_HEADER_BYTES + 16 * (i + 1));
    const tl = blob.readUInt16BE(pos);
    pos += 2;
    const transactionId = blob.toString('utf8', pos, pos + tl);
    pos += tl;
    const cl = blob.readUInt16BE(pos);
    pos += 2;
    const traceContext = cl ? blob.toString('utf8', pos, pos + cl) : undefined;
    pos += cl;
    const pl = blob.readUInt32BE(pos);
    pos += 4;
    const payload = blob.subarray(pos, pos + pl);
    pos += pl;
    let origin: Buffer | undefined;
    if (v2) {
      const ol = blob.readUInt32BE(pos);
      pos += 4;
      if (ol > 0) origin = blob.subarray(pos, pos + ol);
      pos += ol;
    }
    out.push({ id, transactionId, traceContext, payload, origin });
  }
  if (pos !== blob.length) throw new Error(`segment blob has ${blob.length - pos} trailing bytes`);
  return out;
}
