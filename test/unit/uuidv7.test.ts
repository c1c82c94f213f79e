import test from 'ava';
import fc from 'fast-check';
import { uuidToString } from '../../src/util/uuidv7.js';

/** The plain formatting the table-driven one must equal. */
function reference(b: Buffer, at: number): string {
  const h = b.toString('hex', at, at + 16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

test('uuidToString writes 16 bytes as lowercase 8-4-4-4-12 text, at any position', (t) => {
  t.is(uuidToString(Buffer.from('0123456789abcdeffedcba9876543210', 'hex')), '01234567-89ab-cdef-fedc-ba9876543210');
  t.is(uuidToString(Buffer.alloc(16)), '00000000-0000-0000-0000-000000000000');
  t.is(uuidToString(Buffer.alloc(16, 0xff)), 'ffffffff-ffff-ffff-ffff-ffffffffffff');
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 16, maxLength: 64 }), fc.nat(), (bytes, pick) => {
      const b = Buffer.from(bytes);
      const at = pick % (b.length - 15);
      return uuidToString(b, at) === reference(b, at);
    }),
    { numRuns: 2000 },
  );
  t.throws(() => uuidToString(Buffer.alloc(20), 5), { instanceOf: RangeError });
});
