import test from 'ava';
import fc from 'fast-check';
import {
  decodeOrigin,
  encodeOrigin,
  frameOf,
  originSource,
  packSegment,
  unpackSegment,
  type FrameOrigin,
  type HeaderMap,
  type KafkaOrigin,
} from '../../src/engine/frames.js';
import { ValidationError } from '../../src/errors.js';
import { uuidToString, uuidv7Bytes } from '../../src/util/uuidv7.js';

test('pack/unpack round-trips any frames; ids sit at 5 + 16 i', (t) => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          txn: fc.string({ minLength: 1, maxLength: 40 }),
          trace: fc.option(fc.string({ maxLength: 60 }), { nil: undefined }),
          payload: fc.uint8Array({ maxLength: 200 }),
        }),
        { minLength: 1, maxLength: 20 },
      ),
      (frames) => {
        const packed = frames.map((f) => ({
          id: uuidv7Bytes(),
          transactionId: f.txn,
          traceContext: f.trace ? Buffer.from(f.trace) : undefined,
          payload: Buffer.from(f.payload),
        }));
        const blob = packSegment(packed.map(frameOf));
        const back = unpackSegment(blob);
        t.is(back.length, frames.length);
        back.forEach((b, i) => {
          t.deepEqual(b.id, packed[i]!.id);
          t.deepEqual(blob.subarray(5 + 16 * i, 21 + 16 * i), packed[i]!.id);
          t.is(b.transactionId, frames[i]!.txn);
          t.is(b.traceContext, frames[i]!.trace || undefined);
          t.deepEqual(b.payload, Buffer.from(frames[i]!.payload));
        });
      },
    ),
    { numRuns: 100 },
  );
});

const originArb: fc.Arbitrary<KafkaOrigin> = fc.record({
  topic: fc.string({ minLength: 1, maxLength: 30 }),
  partition: fc.integer({ min: 0, max: 0x7fffffff }),
  offset: fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }).map(String),
  timestamp: fc.option(fc.integer({ min: 0, max: 2 ** 45 }), { nil: null }),
  headers: fc.array(
    fc.record({
      key: fc.string({ maxLength: 20 }),
      value: fc.option(
        fc.uint8Array({ maxLength: 50 }).map((a) => Buffer.from(a)),
        { nil: null },
      ),
    }),
    { maxLength: 8 },
  ),
});

/** A decoded-shape origin as the writer is given it: a header map as kafkajs builds one (a repeated key becomes an array). */
function asInput(o: KafkaOrigin): FrameOrigin {
  const headers = Object.create(null) as HeaderMap;
  for (const h of o.headers) {
    const held = headers[h.key];
    if (held === undefined) headers[h.key] = h.value;
    else if (Array.isArray(held)) held.push(h.value);
    else headers[h.key] = [held, h.value];
  }
  return {
    source: originSource(o.topic, o.partition),
    record: { offset: o.offset, timestamp: o.timestamp === null ? undefined : String(o.timestamp), headers },
  };
}

/**
 * What decoding gives back: the headers in the map's key order (a JS object's:
 * integer-like keys first, then the others by first appearance), a key's
 * repeats together.
 */
function grouped(o: KafkaOrigin): KafkaOrigin {
  const keys = Object.keys(asInput(o).record.headers!);
  return { ...o, headers: keys.flatMap((k) => o.headers.filter((h) => h.key === k)) };
}

test('v2: frames with and without an origin round-trip; ids still sit at 5 + 16 i; the origin keeps every header, null values and repeats', (t) => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          txn: fc.string({ minLength: 1, maxLength: 40 }),
          payload: fc.uint8Array({ maxLength: 100 }),
          origin: fc.option(originArb, { nil: undefined }),
        }),
        { minLength: 1, maxLength: 12 },
      ),
      (frames) => {
        const packed = frames.map((f) => ({
          id: uuidv7Bytes(),
          transactionId: f.txn,
          payload: Buffer.from(f.payload),
          origin: f.origin && asInput(f.origin),
        }));
        const blob = packSegment(packed.map(frameOf));
        t.is(blob[0], frames.some((f) => f.origin) ? 2 : 1);
        const back = unpackSegment(blob);
        back.forEach((b, i) => {
          t.deepEqual(blob.subarray(5 + 16 * i, 21 + 16 * i), packed[i]!.id);
          t.is(b.transactionId, frames[i]!.txn);
          t.deepEqual(b.payload, Buffer.from(frames[i]!.payload));
          const want = frames[i]!.origin;
          if (!want) t.is(b.origin, undefined);
          else t.deepEqual(decodeOrigin(b.origin!), grouped(want));
        });
      },
    ),
    { numRuns: 200 },
  );
});

test('a version 1 blob (what HTTP pushes and earlier releases write) still decodes, with no origin', (t) => {
  // Built by hand, byte for byte as docs/frame-format.md gives version 1.
  const id = Buffer.alloc(16, 7);
  const txn = Buffer.from('t-1');
  const payload = Buffer.from('{"a":1}');
  const blob = Buffer.concat([
    Buffer.from([1, 0, 0, 0, 1]),
    id,
    Buffer.from([0, txn.length]),
    txn,
    Buffer.from([0, 0]),
    Buffer.from([0, 0, 0, payload.length]),
    payload,
  ]);
  const [f] = unpackSegment(blob);
  t.deepEqual(f!.id, id);
  t.is(f!.transactionId, 't-1');
  t.is(f!.traceContext, undefined);
  t.deepEqual(f!.payload, payload);
  t.is(f!.origin, undefined);
  t.deepEqual(packSegment([frameOf({ id, transactionId: 't-1', payload })]), blob, 'no origin: written as version 1');
  t.throws(() => unpackSegment(Buffer.concat([Buffer.from([3]), blob.subarray(1)])), { message: /unknown segment format version 3/ });
});

test('an origin that cannot be encoded fails with a ValidationError naming it', (t) => {
  const source = originSource('t', 0);
  const at = (record: FrameOrigin['record']) => () => encodeOrigin({ source, record });
  t.throws(at({ offset: 'x' }), { instanceOf: ValidationError, message: /offset/ });
  t.throws(at({ offset: '' }), { instanceOf: ValidationError, message: /offset/ });
  t.throws(at({ offset: String(1n << 63n) }), { instanceOf: ValidationError, message: /int64/ });
  t.throws(() => originSource('t', -1), { instanceOf: ValidationError, message: /partition/ });
  t.throws(() => originSource('t'.repeat(70_000), 0), { instanceOf: ValidationError, message: /topic/ });
  t.throws(at({ offset: '1', headers: { ['k'.repeat(70_000)]: null } }), { instanceOf: ValidationError, message: /key/ });
  t.throws(at({ offset: '1', headers: { k: Array.from({ length: 70_000 }, () => null) } }), {
    instanceOf: ValidationError,
    message: /headers/,
  });
  // The largest offset Kafka can hold survives exactly (past 2^53); a timestamp of -1 or none reads as null.
  const max = String((1n << 63n) - 1n);
  t.is(decodeOrigin(encodeOrigin({ source, record: { offset: max, timestamp: '-1' } })).offset, max);
  t.is(decodeOrigin(encodeOrigin({ source, record: { offset: '1' } })).timestamp, null);
  t.is(decodeOrigin(encodeOrigin({ source, record: { offset: '-5', timestamp: '1764870000123' } })).timestamp, 1764870000123);
  // String header values (hand-made records) are kept as their UTF-8 bytes.
  t.deepEqual(decodeOrigin(encodeOrigin({ source, record: { offset: '1', headers: { s: 'é' } } })).headers, [
    { key: 's', value: Buffer.from('é') },
  ]);
});

test('uuidv7 ids are version 7 and increase within a process', (t) => {
  const ids = Array.from({ length: 5000 }, () => uuidToString(uuidv7Bytes()));
  for (const id of ids) t.regex(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const sorted = [...ids].sort();
  t.deepEqual(sorted, ids);
  t.is(new Set(ids).size, ids.length);
});
