import test from 'ava';
import fc from 'fast-check';
import { packSegment, unpackSegment } from '../../src/engine/frames.js';
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
          transactionId: Buffer.from(f.txn),
          traceContext: f.trace ? Buffer.from(f.trace) : undefined,
          payload: Buffer.from(f.payload),
        }));
        const blob = packSegment(packed);
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

test('uuidv7 ids are version 7 and increase within a process', (t) => {
  const ids = Array.from({ length: 5000 }, () => uuidToString(uuidv7Bytes()));
  for (const id of ids) t.regex(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const sorted = [...ids].sort();
  t.deepEqual(sorted, ids);
  t.is(new Set(ids).size, ids.length);
});
