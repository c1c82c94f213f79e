import { createRequire } from 'node:module';
import test from 'ava';
import fc from 'fast-check';
import { installRecordDecoder, makeRecordDecoder, type RecordDecodeFn } from '../../src/ingress/recordDecoder.js';

// kafkajs's own record decoder and Decoder: what the fast one must match.
const require = createRequire(import.meta.url);
const original = require('kafkajs/src/protocol/recordBatch/record/v0/decoder.js') as RecordDecodeFn;
const Decoder = require('kafkajs/src/protocol/decoder.js') as new (b: Buffer) => Parameters<RecordDecodeFn>[0];
const fast = makeRecordDecoder(original);

// The record wire format (Kafka's record v2), written here so a test can
// hold any header list: repeats interleaved, null keys, null values.
function varint(v: bigint): number[] {
  let z = BigInt.asUintN(64, (v << 1n) ^ (v >> 63n));
  const out: number[] = [];
  while (z >= 0x80n) {
    out.push(Number(z & 0x7fn) | 0x80);
    z >>= 7n;
  }
  out.push(Number(z));
  return out;
}
function bytes(b: Buffer | null): number[] {
  return b === null ? varint(-1n) : [...varint(BigInt(b.length)), ...b];
}
interface Rec {
  timestampDelta: bigint;
  offsetDelta: number;
  key: Buffer | null;
  value: Buffer | null;
  /** A name as a string (its UTF-8 bytes) or as raw bytes (any byte sequence, valid UTF-8 or not). */
  headers: [string | Buffer | null, Buffer | null][];
}
function encode(r: Rec): Buffer {
  const body = [
    0,
    ...varint(r.timestampDelta),
    ...varint(BigInt(r.offsetDelta)),
    ...bytes(r.key),
    ...bytes(r.value),
    ...varint(BigInt(r.headers.length)),
    ...r.headers.flatMap(([k, v]) => [...bytes(k === null || Buffer.isBuffer(k) ? k : Buffer.from(k)), ...bytes(v)]),
  ];
  return Buffer.from(body);
}

interface Ctx {
  firstOffset: string;
  firstTimestamp: string;
  magicByte: number;
  isControlBatch: boolean;
  timestampType: number;
  maxTimestamp: string;
}

function decodeBoth(r: Rec, ctx: Ctx): [unknown, unknown] {
  const buf = encode(r);
  const a = new Decoder(buf);
  const b = new Decoder(buf);
  // Both decoders must also leave the decoder at the record's end.
  const ra = original(a, ctx);
  const rb = fast(b, ctx);
  return [
    { ...ra, end: a.offset },
    { ...rb, end: b.offset },
  ];
}

const int64 = fc.bigInt(-(2n ** 63n), 2n ** 63n - 1n);
// Offsets and timestamps where they live: small, around 2^53 (where doubles
// stop being exact), and anywhere in int64.
const base = fc.oneof(
  fc.bigInt(0n, 10n ** 7n),
  fc.bigInt(2n ** 53n - 2_000_000n, 2n ** 53n + 2_000_000n),
  fc.constant(-1n),
  fc.bigInt(1_500_000_000_000n, 2_000_000_000_000n),
  int64,
);
const delta = fc.oneof(fc.bigInt(-1000n, 100_000n), fc.bigInt(-(2n ** 49n), 2n ** 49n), fc.bigInt(-(2n ** 62n), 2n ** 62n));
// Header names that collide with Object.prototype are left out here (kafkajs
// reads them as inherited members); they have their own test below.
const headerName = fc.oneof(
  fc.constantFrom('transactionId', 'traceparent', 'a', 'b', '1', '0', '10', 'é', ''),
  fc.string({ maxLength: 6 }).filter((s) => !(s in Object.prototype)),
);
const buf = fc.option(
  fc.uint8Array({ maxLength: 40 }).map((u) => Buffer.from(u)),
  { nil: null },
);
const rec = fc.record({
  timestampDelta: delta,
  offsetDelta: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  key: buf,
  value: buf,
  headers: fc.array(fc.tuple(headerName, buf), { maxLength: 6 }),
});
const ctx = fc.record({
  firstOffset: base.map(String),
  firstTimestamp: base.map(String),
  magicByte: fc.constant(2),
  isControlBatch: fc.boolean(),
  timestampType: fc.constantFrom(0, 1),
  maxTimestamp: fc.oneof(base.map(String), fc.constant('')),
});

test('the fast decoder returns what kafkajs returns, field for field, on random records and batches', (t) => {
  fc.assert(
    fc.property(rec, ctx, (r, c) => {
      const [a, b] = decodeBoth(r, c);
      t.deepEqual(b, a);
    }),
    { numRuns: 3000 },
  );
});

test('records of one batch share its context: each gets its own offset and timestamp', (t) => {
  const c: Ctx = {
    firstOffset: String(2n ** 53n - 2n),
    firstTimestamp: '1733400000000',
    magicByte: 2,
    isControlBatch: false,
    timestampType: 0,
    maxTimestamp: '1733400009999',
  };
  const offsets: string[] = [];
  for (let i = 0; i < 5; i++) {
    const r: Rec = { timestampDelta: BigInt(i * 7), offsetDelta: i, key: null, value: Buffer.from('v'), headers: [] };
    const [a, b] = decodeBoth(r, c);
    t.deepEqual(b, a);
    offsets.push((b as { offset: string }).offset);
  }
  // Past 2^53 the exact sums come from kafkajs's own path: no two records share an offset.
  t.deepEqual(offsets, ['9007199254740990', '9007199254740991', '9007199254740992', '9007199254740993', '9007199254740994']);
});

/** A batch at offset 0, time 0; a record with no key or value, only these headers. */
const ZERO_CTX: Ctx = { firstOffset: '0', firstTimestamp: '0', magicByte: 2, isControlBatch: false, timestampType: 0, maxTimestamp: '0' };
const headersOnly = (headers: Rec['headers']): Rec => ({ timestampDelta: 0n, offsetDelta: 0, key: null, value: null, headers });

test('repeated header keys fold into one array in record order; null keys and values stay as kafkajs has them', (t) => {
  const r = headersOnly([
    ['a', Buffer.from('1')],
    ['b', null],
    ['a', Buffer.from('2')],
    [null, Buffer.from('n')],
    ['b', Buffer.from('3')],
    ['a', null],
    ['2', Buffer.from('x')],
  ]);
  const c = ZERO_CTX;
  const [a, b] = decodeBoth(r, c);
  t.deepEqual(b, a);
  const h = (b as { headers: Record<string, unknown> }).headers;
  t.deepEqual(Object.keys(h), ['2', 'a', 'b', 'null']);
  t.deepEqual(h.a, [Buffer.from('1'), Buffer.from('2'), null]);
  t.deepEqual(h.b, [null, Buffer.from('3')]);
});

test('header names seen before come back as the string their bytes decode to: invalid UTF-8, long names and names past the cache included', (t) => {
  const c = ZERO_CTX;
  const names: (string | Buffer)[] = [
    Buffer.from([0xff, 0xfe, 0x41]),
    Buffer.from([0xc3]),
    'x'.repeat(100),
    ...Array.from({ length: 40 }, (_, i) => `name-${i}`),
    // Same length as the names above, different bytes: a cached entry must match on every byte.
    'name-9x',
    'eman-1',
  ];
  const r = headersOnly(names.map((n, i) => [n, Buffer.from([i])]));
  // Twice: the first pass fills the cache, the second reads from it.
  for (let pass = 0; pass < 2; pass++) {
    const [a, b] = decodeBoth(r, c);
    t.deepEqual(b, a, `pass ${pass}`);
    t.is(Object.keys((b as { headers: object }).headers).length, names.length);
  }
});

test('a header named like an Object.prototype member is a plain header (kafkajs stored the inherited member with it)', (t) => {
  const c = ZERO_CTX;
  const r = headersOnly([
    ['toString', Buffer.from('t')],
    ['__proto__', Buffer.from('p')],
    ['constructor', Buffer.from('c1')],
    ['constructor', Buffer.from('c2')],
  ]);
  const b = fast(new Decoder(encode(r)), c);
  t.deepEqual(Object.keys(b.headers), ['toString', '__proto__', 'constructor']);
  t.deepEqual(b.headers['toString' as string], Buffer.from('t'));
  t.true(Object.hasOwn(b.headers, '__proto__'));
  t.is(Object.getPrototypeOf(b.headers), Object.prototype, 'a __proto__ header does not replace the prototype');
  t.deepEqual(Object.getOwnPropertyDescriptor(b.headers, '__proto__')?.value, Buffer.from('p'));
  t.deepEqual(b.headers.constructor, [Buffer.from('c1'), Buffer.from('c2')]);
  // What kafkajs made of the same record: the inherited member inside the value.
  const a = original(new Decoder(encode(r)), c);
  t.is(typeof (a.headers.toString as unknown as unknown[])[0], 'function');
});

test('installed before kafkajs loads its batch decoder, the batch decoder decodes with it; a second install is a no-op', async (t) => {
  t.is(installRecordDecoder(), 'installed');
  t.is(installRecordDecoder(), 'already installed');
  const batchDecoder = require('kafkajs/src/protocol/recordBatch/v0/decoder.js') as (d: unknown) => Promise<{ records: unknown[] }>;
  const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as {
    RecordBatch: (o: object) => Promise<{ buffer: Buffer }>;
  };
  const Record = require('kafkajs/src/protocol/recordBatch/record/v0/index.js') as (o: object) => unknown;
  const Long = require('kafkajs/src/utils/long.js') as { fromString: (s: string) => unknown };
  const encoded = await RecordBatch({
    firstOffset: Long.fromString('41'),
    firstTimestamp: 1733400000000,
    maxTimestamp: 1733400000005,
    records: [Record({ offsetDelta: 0, timestampDelta: 0, key: null, value: Buffer.from('x'), headers: { toString: 'y' } })],
  });
  const decoded = await batchDecoder(new Decoder(encoded.buffer));
  const first = decoded.records[0] as { offset: string; headers: Record<string, unknown> };
  t.is(first.offset, '41');
  // Only the installed decoder keeps a header named toString as a plain value.
  t.deepEqual(first.headers['toString' as string], Buffer.from('y'));
});
