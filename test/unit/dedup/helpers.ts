import { HASH_BYTES } from '../../../src/util/txnHash.js';
import type { TxnRow } from '../../../src/dedup/index.js';

/**
 * Deterministic 16-byte "hashes" for tests: hash n of stream s is a
 * murmur3-finalised mix of (s, n, word), so streams never collide in
 * practice and a failing property replays exactly.
 */
function mix(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

export function hashAt(stream: number, n: number, out: Buffer = Buffer.alloc(HASH_BYTES), at = 0): Buffer {
  const a = mix(stream * 0x9e3779b1 + 0x7f4a7c15);
  const b = mix(n ^ a);
  const c = mix(Math.imul(n, 0x27d4eb2f) + a + 1);
  out.writeUInt32BE(mix(b ^ 0x1b873593), at);
  out.writeUInt32BE(mix(c ^ b), at + 4);
  out.writeUInt32BE(mix(a ^ c ^ 0x3c6ef372), at + 8);
  out.writeUInt32BE(mix(b + c + n), at + 12);
  return out;
}

/** count hashes of `stream`, numbers first .. first + count - 1, packed. */
export function hashRun(stream: number, first: number, count: number): Buffer {
  const out = Buffer.alloc(count * HASH_BYTES);
  for (let i = 0; i < count; i++) hashAt(stream, first + i, out, i * HASH_BYTES);
  return out;
}

/** Rows of `perRow` hashes each covering offsets 0 .. total-1, created at createdMs(rowIndex). */
export function makeRows(stream: number, total: number, perRow: number, createdMs: (row: number) => number): TxnRow[] {
  const rows: TxnRow[] = [];
  for (let base = 0, r = 0; base < total; base += perRow, r++) {
    const n = Math.min(perRow, total - base);
    rows.push({ baseOffset: base, endOffset: base + n - 1, createdMs: createdMs(r), hashes: hashRun(stream, base, n) });
  }
  return rows;
}

/** A settable clock for the cache. */
export class FakeClock {
  constructor(public ms = 1_700_000_000_000) {}
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}
