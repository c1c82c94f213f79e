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

export interface Frame {
  id: Buffer; // 16 bytes
  transactionId: Buffer; // UTF-8
  traceContext: Buffer | undefined; // UTF-8, optional
  payload: Buffer;
  /** An encoded origin section (encodeOrigin), optional. */
  origin?: Buffer | undefined;
}

const MAX_U16 = 0xffff;
const MAX_I32 = 0x7fffffff;
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

/**
 * A Kafka origin as its frame section. Throws ValidationError naming what
 * does not fit (a key or topic over 65 535 bytes, more than 65 535 headers,
 * an offset that is not an int64): the writer fails that item alone.
 */
export function encodeOrigin(o: KafkaOrigin): Buffer {
  const topic = Buffer.from(o.topic, 'utf8');
  if (topic.length > MAX_U16) throw new ValidationError('origin topic is over 65535 bytes', 'origin');
  if (!Number.isInteger(o.partition) || o.partition < 0 || o.partition > MAX_I32)
    throw new ValidationError(`origin partition ${o.partition} is not a Kafka partition`, 'origin');
  const offset = int64(o.offset, 'offset');
  const timestamp = o.timestamp === null ? -1n : int64(String(o.timestamp), 'timestamp');
  if (o.headers.length > MAX_U16) throw new ValidationError(`origin has ${o.headers.length} headers, over 65535`, 'origin');
  const keys: Buffer[] = [];
  let size = 2 + topic.length + 4 + 8 + 8 + 2;
  for (const h of o.headers) {
    const key = Buffer.from(h.key, 'utf8');
    if (key.length > MAX_U16) throw new ValidationError('an origin header key is over 65535 bytes', 'origin');
    if (h.value !== null && h.value.length > MAX_I32) throw new ValidationError('an origin header value is too long', 'origin');
    keys.push(key);
    size += 2 + key.length + 4 + (h.value?.length ?? 0);
  }
  const out = Buffer.allocUnsafe(size);
  let pos = out.writeUInt16BE(topic.length, 0);
  pos += topic.copy(out, pos);
  pos = out.writeInt32BE(o.partition, pos);
  pos = out.writeBigInt64BE(offset, pos);
  pos = out.writeBigInt64BE(timestamp, pos);
  pos = out.writeUInt16BE(o.headers.length, pos);
  o.headers.forEach((h, i) => {
    const key = keys[i]!;
    pos = out.writeUInt16BE(key.length, pos);
    pos += key.copy(out, pos);
    if (h.value === null) pos = out.writeInt32BE(-1, pos);
    else {
      pos = out.writeInt32BE(h.value.length, pos);
      pos += h.value.copy(out, pos);
    }
  });
  return out;
}

function int64(text: string, what: string): bigint {
  let v: bigint;
  try {
    v = BigInt(text);
  } catch {
    throw new ValidationError(`origin ${what} ${JSON.stringify(text)} is not an integer`, 'origin');
  }
  if (v < INT64_MIN || v > INT64_MAX) throw new ValidationError(`origin ${what} ${text} is not an int64`, 'origin');
  return v;
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
  const offset = b.readBigInt64BE(pos).toString();
  pos += 8;
  const ts = b.readBigInt64BE(pos);
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
  return { topic, partition, offset, timestamp: ts < 0n ? null : Number(ts), headers };
}

export function packSegment(frames: readonly Frame[]): Buffer {
  const v2 = frames.some((f) => f.origin !== undefined);
  let size = FRAME_HEADER_BYTES;
  for (const f of frames) {
    size += 16 + 2 + f.transactionId.length + 2 + (f.traceContext?.length ?? 0) + 4 + f.payload.length;
    if (v2) size += 4 + (f.origin?.length ?? 0);
  }
  const out = Buffer.allocUnsafe(size);
  out[0] = v2 ? FRAME_FORMAT_V2 : FRAME_FORMAT_V1;
  out.writeUInt32BE(frames.length, 1);
  let pos = FRAME_HEADER_BYTES;
  for (const f of frames) {
    f.id.copy(out, pos);
    pos += 16;
  }
  for (const f of frames) {
    out.writeUInt16BE(f.transactionId.length, pos);
    pos += 2;
    pos += f.transactionId.copy(out, pos);
    const trace = f.traceContext;
    out.writeUInt16BE(trace?.length ?? 0, pos);
    pos += 2;
    if (trace) pos += trace.copy(out, pos);
    out.writeUInt32BE(f.payload.length, pos);
    pos += 4;
    pos += f.payload.copy(out, pos);
    if (v2) {
      const origin = f.origin;
      out.writeUInt32BE(origin?.length ?? 0, pos);
      pos += 4;
      if (origin) pos += origin.copy(out, pos);
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
