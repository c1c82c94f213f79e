/**
 * PostgreSQL's binary COPY format, both ways, for the few column types the
 * broker's compaction moves (int4, int8, bytea, int8[]): a reader that hands
 * over each tuple's fields as views of the received bytes, and a writer that
 * packs tuples into one buffer. (The window fetch has its own fixed-shape
 * parser, windowFetch.ts, tuned for its one row type.)
 *
 * Format: an 11-byte signature, a 4-byte flags word, a 4-byte extension
 * length and the extension; then per tuple an int16 field count and, per
 * field, an int32 length (-1: NULL) and that many bytes; then int16 -1.
 */

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
/** Signature, flags, extension length: the header a writer emits (no extension). */
const HEADER_BYTES = SIGNATURE.length + 8;
const INT8_OID = 20;

/**
 * Reads a binary COPY stream chunk by chunk; each complete tuple goes to
 * `onTuple` as field views (null: SQL NULL), in an array reused for the next
 * tuple (read it before returning).
 */
export class BinaryCopyReader {
  private buf: Buffer = Buffer.alloc(0);
  private headerDone = false;
  private done = false;

  constructor(
    private readonly fields: number,
    private readonly onTuple: (fields: (Buffer | null)[]) => void,
  ) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length > 0 ? Buffer.concat([this.buf, chunk]) : chunk;
    let pos = 0;
    if (!this.headerDone) {
      if (this.buf.length < HEADER_BYTES) return;
      if (!this.buf.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw new Error('not a binary COPY stream');
      const extLen = this.buf.readUInt32BE(SIGNATURE.length + 4);
      if (this.buf.length < HEADER_BYTES + extLen) return;
      pos = HEADER_BYTES + extLen;
      this.headerDone = true;
    }
    const out: (Buffer | null)[] = new Array<Buffer | null>(this.fields);
    while (!this.done && this.buf.length - pos >= 2) {
      const n = this.buf.readInt16BE(pos);
      if (n === -1) {
        this.done = true;
        pos += 2;
        break;
      }
      if (n !== this.fields) throw new Error(`binary COPY: expected ${this.fields} fields, got ${n}`);
      // Walk the fields first; hand the tuple over only when all of it is here.
      let p = pos + 2;
      let complete = true;
      for (let f = 0; f < n; f++) {
        if (this.buf.length - p < 4) {
          complete = false;
          break;
        }
        const len = this.buf.readInt32BE(p);
        p += 4;
        if (len < 0) {
          out[f] = null;
          continue;
        }
        if (this.buf.length - p < len) {
          complete = false;
          break;
        }
        // Views, not copies: the chunks are fresh reads that nothing writes into.
        out[f] = this.buf.subarray(p, p + len);
        p += len;
      }
      if (!complete) break;
      this.onTuple(out);
      pos = p;
    }
    this.buf = this.buf.subarray(pos);
  }

  /** Throws unless the stream's trailer arrived. */
  finish(): void {
    if (!this.done) throw new Error('binary COPY stream ended early');
  }
}

/** The elements of a binary int8[] value (one dimension, no NULLs: what the runs store). */
export function readInt8Array(b: Buffer): number[] {
  const ndim = b.readInt32BE(0);
  if (ndim === 0) return [];
  if (ndim !== 1) throw new Error(`binary COPY: expected a one-dimensional array, got ${ndim} dimensions`);
  if (b.readInt32BE(8) !== INT8_OID) throw new Error('binary COPY: expected an int8 array');
  const count = b.readInt32BE(12);
  const out = new Array<number>(count);
  let p = 20;
  for (let i = 0; i < count; i++) {
    if (b.readInt32BE(p) !== 8) throw new Error('binary COPY: an int8 array element is NULL or malformed');
    out[i] = readInt8(b, p + 4);
    p += 12;
  }
  return out;
}

/** A field a writer packs. */
export type CopyField = { int4: number } | { int8: number } | { bytea: Buffer } | { int8Array: readonly number[] } | { null: true };

/**
 * Packs tuples into one binary COPY buffer (header, tuples, trailer),
 * written in place into a buffer that doubles as it fills: a run's slices
 * are copied once, not once per tuple and again to join them.
 */
export class BinaryCopyWriter {
  private buf = Buffer.allocUnsafe(4096);
  private at = 0;

  constructor() {
    this.reserve(HEADER_BYTES);
    SIGNATURE.copy(this.buf, 0);
    this.buf.fill(0, SIGNATURE.length, HEADER_BYTES);
    this.at = HEADER_BYTES;
  }

  tuple(fields: readonly CopyField[]): void {
    let size = 2;
    for (const f of fields) size += 4 + fieldBytes(f);
    this.reserve(size);
    this.buf.writeInt16BE(fields.length, this.at);
    let p = this.at + 2;
    for (const f of fields) p = writeField(this.buf, p, f);
    this.at = p;
  }

  /** The whole stream, trailer included (a view of the writer's buffer). */
  finish(): Buffer {
    this.reserve(2);
    this.at = this.buf.writeInt16BE(-1, this.at);
    return this.buf.subarray(0, this.at);
  }

  private reserve(bytes: number): void {
    if (this.at + bytes <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.at + bytes) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
  }
}

function fieldBytes(f: CopyField): number {
  if ('null' in f) return 0;
  if ('int4' in f) return 4;
  if ('int8' in f) return 8;
  if ('bytea' in f) return f.bytea.length;
  return 20 + 12 * f.int8Array.length;
}

function writeField(b: Buffer, p: number, f: CopyField): number {
  if ('null' in f) return b.writeInt32BE(-1, p);
  b.writeInt32BE(fieldBytes(f), p);
  p += 4;
  if ('int4' in f) return b.writeInt32BE(f.int4, p);
  if ('int8' in f) return writeInt8(b, p, f.int8);
  if ('bytea' in f) return p + f.bytea.copy(b, p);
  const a = f.int8Array;
  b.writeInt32BE(1, p); // one dimension
  b.writeInt32BE(0, p + 4); // no NULLs
  b.writeInt32BE(INT8_OID, p + 8);
  b.writeInt32BE(a.length, p + 12);
  b.writeInt32BE(1, p + 16); // lower bound
  p += 20;
  for (const v of a) {
    b.writeInt32BE(8, p);
    writeInt8(b, p + 4, v);
    p += 12;
  }
  return p;
}

/**
 * An int8 as two 32-bit words, without a BigInt per value (one per offset
 * was a measurable share of a compaction step's broker CPU). Exact for every
 * safe integer, which every offset and run id is; anything else is refused
 * rather than written rounded.
 */
function writeInt8(b: Buffer, p: number, v: number): number {
  if (!Number.isSafeInteger(v)) throw new RangeError(`binary COPY: ${v} is not a safe integer`);
  const hi = Math.floor(v / 2 ** 32);
  b.writeInt32BE(hi, p);
  b.writeUInt32BE(v - hi * 2 ** 32, p + 4);
  return p + 8;
}

/** The int8 at p, read as two 32-bit words; refuses a value outside the safe integers. */
export function readInt8(b: Buffer, p: number): number {
  const v = b.readInt32BE(p) * 2 ** 32 + b.readUInt32BE(p + 4);
  if (!Number.isSafeInteger(v)) throw new RangeError('binary COPY: an int8 outside the safe integers');
  return v;
}
