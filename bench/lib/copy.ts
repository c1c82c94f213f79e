import { once } from 'node:events';
import type pg from 'pg';
import copyStreams from 'pg-copy-streams';

const { from: copyFrom } = copyStreams;

/** Microseconds between the Unix epoch and PostgreSQL's (2000-01-01 UTC). */
const PG_EPOCH_MS = 946_684_800_000;
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const CHUNK = 1 << 20;

/**
 * Encoder for COPY ... FROM STDIN (FORMAT binary): rows are appended into
 * 1 MiB chunks, which the owner ships with ship() (backpressure-aware).
 */
export class BinaryCopyWriter {
  private buf = Buffer.allocUnsafe(CHUNK);
  private pos = 0;
  private readonly ready: Buffer[] = [];
  private failed: Error | undefined;
  private readonly stream: NodeJS.WritableStream & { on: (e: string, f: (...a: unknown[]) => void) => unknown };
  private readonly done: Promise<void>;

  constructor(client: pg.PoolClient | pg.Client, sql: string) {
    const s = client.query(copyFrom(sql));
    this.stream = s;
    this.done = new Promise<void>((resolve, reject) => {
      s.on('finish', () => resolve());
      s.on('error', (e: Error) => {
        this.failed = e;
        reject(e);
      });
    });
    this.done.catch(() => undefined);
    SIGNATURE.copy(this.buf, 0);
    this.buf.writeInt32BE(0, 11); // flags
    this.buf.writeInt32BE(0, 15); // header extension length
    this.pos = 19;
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    if (this.pos > 0) this.ready.push(this.buf.subarray(0, this.pos));
    this.buf = Buffer.allocUnsafe(Math.max(CHUNK, n));
    this.pos = 0;
  }

  row(fields: number): void {
    this.ensure(2);
    this.buf.writeInt16BE(fields, this.pos);
    this.pos += 2;
  }

  int8(v: number): void {
    this.ensure(12);
    this.buf.writeInt32BE(8, this.pos);
    this.buf.writeBigInt64BE(BigInt(v), this.pos + 4);
    this.pos += 12;
  }

  int4(v: number): void {
    this.ensure(8);
    this.buf.writeInt32BE(4, this.pos);
    this.buf.writeInt32BE(v, this.pos + 4);
    this.pos += 8;
  }

  /** timestamptz from Unix ms (microsecond precision kept for fractional ms). */
  timestamptz(ms: number): void {
    this.ensure(12);
    this.buf.writeInt32BE(8, this.pos);
    this.buf.writeBigInt64BE(BigInt(Math.round((ms - PG_EPOCH_MS) * 1000)), this.pos + 4);
    this.pos += 12;
  }

  /** bytea or uuid (16 bytes) or any raw binary value. */
  bytes(b: Buffer, from = 0, to = b.length): void {
    const n = to - from;
    this.ensure(4 + n);
    this.buf.writeInt32BE(n, this.pos);
    b.copy(this.buf, this.pos + 4, from, to);
    this.pos += 4 + n;
  }

  get pendingBytes(): number {
    let n = this.pos;
    for (const r of this.ready) n += r.length;
    return n;
  }

  /** Writes full chunks to the COPY stream, waiting for drain when PostgreSQL is behind. */
  async ship(all = false): Promise<void> {
    if (this.failed) throw this.failed;
    if (all && this.pos > 0) {
      this.ready.push(this.buf.subarray(0, this.pos));
      this.buf = Buffer.allocUnsafe(CHUNK);
      this.pos = 0;
    }
    while (this.ready.length > 0) {
      const c = this.ready.shift()!;
      if (!this.stream.write(c)) await Promise.race([once(this.stream as never, 'drain'), this.done]);
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition, @typescript-eslint/only-throw-error -- set by the stream's error listener while the write awaited (TypeScript keeps the narrowing from the check above across the await)
      if (this.failed) throw this.failed;
    }
  }

  /** Trailer, end of stream, and PostgreSQL's acknowledgement. */
  async end(): Promise<void> {
    this.ensure(2);
    this.buf.writeInt16BE(-1, this.pos);
    this.pos += 2;
    await this.ship(true);
    this.stream.end();
    await this.done;
  }
}
