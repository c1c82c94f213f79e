import { randomBytes } from 'node:crypto';
import { compress as zstdCompress, decompress as zstdDecompress } from '@mongodb-js/zstd';
import kafkajs from 'kafkajs';
import { compressFrame as lz4CompressFrame, decompressFrame as lz4DecompressFrame } from 'lz4-napi';
import { compressSync as snappyCompress, uncompressSync as snappyUncompress } from 'snappy';
import type { KafkaRecord } from './recordMapping.js';

/**
 * The Kafka compression codecs kafkajs lacks (it ships gzip only): lz4,
 * zstd and snappy, each from an npm package that carries a prebuilt binary
 * for this platform (nothing is compiled or downloaded at install time).
 * Formats are the Java client's, which is what upstream producers use:
 *   lz4     the LZ4 frame format (magic 0x184D2204), as KafkaLZ4BlockOutputStream writes for record batches v2;
 *   zstd    a zstd frame (zstd-jni streaming output, content size may be absent);
 *   snappy  xerial's SnappyOutputStream framing (a 16-byte header, then [int32 length][raw block]...),
 *           or a bare raw block, which older clients wrote.
 *
 * A batch that cannot be decompressed must not stop its partition. kafkajs
 * decodes a whole fetch response at once, so a throwing codec would fail the
 * fetch of every partition, crash the consumer, and the same batch would crash
 * it again after each restart. Instead the codec answers with one stand-in
 * record per offset of the batch, each carrying a marker header; the ingress
 * dead-letters them with the reason (the first keeps the raw compressed
 * bytes as its value) and commits past the batch. The marker includes a
 * random per-process nonce, so no producer can forge one.
 */

export type CodecName = 'lz4' | 'zstd' | 'snappy';

/** Header the stand-in records carry: `<nonce>\x1f<codec>\x1f<reason>`. */
export const UNDECODABLE_HEADER = 'queen-undecodable';
const NONCE = randomBytes(12).toString('hex');

/** Raw compressed bytes kept on a stand-in are capped so a dead letter stays under the broker's message limit. */
const MAX_KEPT_BYTES = 900 * 1024;

const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_BLOCK = 32 * 1024;

export function snappyDecodeKafka(buf: Buffer): Buffer {
  if (buf.length < 16 || !buf.subarray(0, 8).equals(XERIAL_MAGIC)) return snappyUncompress(buf) as Buffer;
  const parts: Buffer[] = [];
  let pos = 16;
  while (pos < buf.length) {
    if (pos + 4 > buf.length) throw new Error('truncated xerial snappy block header');
    const len = buf.readInt32BE(pos);
    pos += 4;
    if (len < 0 || pos + len > buf.length) throw new Error('truncated xerial snappy block');
    parts.push(snappyUncompress(buf.subarray(pos, pos + len)) as Buffer);
    pos += len;
  }
  return Buffer.concat(parts);
}

export function snappyEncodeKafka(buf: Buffer): Buffer {
  const header = Buffer.alloc(16);
  XERIAL_MAGIC.copy(header, 0);
  header.writeInt32BE(1, 8); // version
  header.writeInt32BE(1, 12); // minimum compatible version
  const parts: Buffer[] = [header];
  for (let i = 0; i < buf.length; i += XERIAL_BLOCK) {
    const block = snappyCompress(buf.subarray(i, i + XERIAL_BLOCK));
    const len = Buffer.alloc(4);
    len.writeInt32BE(block.length, 0);
    parts.push(len, block);
  }
  return Buffer.concat(parts);
}

const decoders: Record<CodecName, (b: Buffer) => Promise<Buffer>> = {
  lz4: (b) => lz4DecompressFrame(b),
  zstd: (b) => zstdDecompress(b),
  snappy: async (b) => snappyDecodeKafka(b),
};

const encoders: Record<CodecName, (b: Buffer) => Promise<Buffer>> = {
  lz4: (b) => lz4CompressFrame(b),
  zstd: (b) => zstdCompress(b, 3),
  snappy: async (b) => snappyEncodeKafka(b),
};

// ---- stand-in records for an undecodable batch -------------------------

function zigzagVarint(n: number, out: number[]): void {
  let v = n >= 0 ? n * 2 : -n * 2 - 1;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
}

function varBytes(b: Buffer | null, out: number[], chunks: Buffer[]): void {
  if (b === null) {
    zigzagVarint(-1, out);
    return;
  }
  zigzagVarint(b.length, out);
  flush(out, chunks);
  chunks.push(b);
}

function flush(out: number[], chunks: Buffer[]): void {
  if (out.length > 0) chunks.push(Buffer.from(out.splice(0)));
}

/** One record v2 body: attributes, timestampDelta 0, offsetDelta, null key, value, one header. */
function standInRecord(offsetDelta: number, value: Buffer, marker: Buffer): Buffer {
  const out: number[] = [0 /* attributes */, 0 /* timestampDelta (zigzag 0) */];
  const chunks: Buffer[] = [];
  zigzagVarint(offsetDelta, out);
  zigzagVarint(-1, out); // key: null
  varBytes(value, out, chunks);
  zigzagVarint(1, out); // one header
  varBytes(Buffer.from(UNDECODABLE_HEADER), out, chunks);
  varBytes(marker, out, chunks);
  flush(out, chunks);
  const body = Buffer.concat(chunks);
  const len: number[] = [];
  zigzagVarint(body.length, len);
  return Buffer.concat([Buffer.from(len), body]);
}

/**
 * The record batch v2 header sits right before the compressed records in
 * kafkajs's fetch buffer (the codec receives a view into it): 61 bytes from
 * baseOffset to the record count. Returns the batch's record count and last
 * offset delta, or undefined when the bytes there do not look like a v2
 * header (then the caller rethrows: a crash the supervisor reports, never a
 * silent skip).
 */
function batchShape(compressed: Buffer): { count: number; lastOffsetDelta: number } | undefined {
  const HEADER = 61;
  if (compressed.byteOffset < HEADER) return undefined;
  const h = Buffer.from(compressed.buffer, compressed.byteOffset - HEADER, HEADER);
  const magic = h.readInt8(16);
  const attributes = h.readInt16BE(21);
  const lastOffsetDelta = h.readInt32BE(23);
  const count = h.readInt32BE(57);
  if (magic !== 2 || (attributes & 0x07) === 0 || count <= 0 || lastOffsetDelta < count - 1 || count > 1_000_000) return undefined;
  return { count, lastOffsetDelta };
}

function standInBatch(codec: CodecName, compressed: Buffer, err: unknown): Buffer | undefined {
  const shape = batchShape(compressed);
  if (!shape) return undefined;
  const reason = `undecodable ${codec} batch: ${(err as Error | null | undefined)?.message ?? String(err)}`;
  const marker = Buffer.from(`${NONCE}\x1f${codec}\x1f${reason}`);
  const raw = compressed.length <= MAX_KEPT_BYTES ? Buffer.from(compressed) : Buffer.alloc(0);
  const records: Buffer[] = [];
  for (let i = 0; i < shape.count; i++) {
    // Offsets of a compacted batch may have gaps; the last stand-in ends the batch so the commit passes it.
    const delta = i === shape.count - 1 ? shape.lastOffsetDelta : i;
    records.push(standInRecord(delta, i === 0 ? raw : Buffer.alloc(0), marker));
  }
  return Buffer.concat(records);
}

/** When `rec` is a stand-in for an undecodable batch made by this process: the reason. */
export function undecodableReason(rec: KafkaRecord): string | undefined {
  const v = rec.headers?.[UNDECODABLE_HEADER];
  if (v === undefined || v === null || Array.isArray(v)) return undefined;
  const s = v.toString();
  const [nonce, , reason] = s.split('\x1f');
  return nonce === NONCE && reason ? reason : undefined;
}

const decoded: Record<CodecName, number> = { lz4: 0, zstd: 0, snappy: 0 };
const undecodable: Record<CodecName, number> = { lz4: 0, zstd: 0, snappy: 0 };

/** Batches decompressed and batches found undecodable, per codec, in this process. */
export function codecStats(): { decoded: Record<CodecName, number>; undecodable: Record<CodecName, number> } {
  return { decoded: { ...decoded }, undecodable: { ...undecodable } };
}

// kafkajs is CommonJS; its codec table is not a named ESM export.
const { CompressionCodecs, CompressionTypes } = kafkajs;
let registered = false;

/** Registers lz4, zstd and snappy with kafkajs (process-wide, idempotent). */
export function registerCodecs(): void {
  if (registered) return;
  registered = true;
  const types: [CodecName, number][] = [
    ['lz4', CompressionTypes.LZ4],
    ['zstd', CompressionTypes.ZSTD],
    ['snappy', CompressionTypes.Snappy],
  ];
  for (const [name, type] of types) {
    const codec = {
      compress: (encoder: { buffer: Buffer }) => encoders[name](encoder.buffer),
      decompress: async (buffer: Buffer) => {
        let out: Buffer;
        try {
          out = await decoders[name](buffer);
        } catch (err) {
          const standIn = standInBatch(name, buffer, err);
          if (!standIn) throw err;
          undecodable[name]++;
          return standIn;
        }
        decoded[name]++;
        return out;
      },
    };
    (CompressionCodecs as Record<number, () => typeof codec>)[type] = () => codec;
  }
}
