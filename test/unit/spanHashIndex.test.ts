import test from 'ava';
import { spanHashIndex } from '../../src/engine/acks.js';
import { hashString, hashTransactionId } from '../../src/util/txnHash.js';

const blob = (ids: string[]): Buffer => Buffer.concat(ids.map((id) => hashTransactionId(id)));
const key = (id: string): bigint => hashString(id);

test('a span index holds only the span offsets of each log_txns row, repeated hashes ascending', (t) => {
  // Span 3..7 of partition 9, over two log_txns rows (0..4 and 5..9), given out of order.
  const rows = [
    { pid: '9', lo: '3', hi: '7', base_offset: '5', hashes: blob(['f', 'a', 'g', 'h', 'i']) },
    { pid: '9', lo: '3', hi: '7', base_offset: '0', hashes: blob(['x', 'y', 'z', 'a', 'e']) },
  ];
  const m = spanHashIndex(rows).get('9:3');
  t.truthy(m);
  t.deepEqual(m?.get(key('a')), [3, 6], 'both occurrences in the span, lowest first');
  t.deepEqual(m?.get(key('e')), [4]);
  t.deepEqual(m?.get(key('g')), [7]);
  for (const outside of ['x', 'y', 'z', 'h', 'i']) t.is(m?.get(key(outside)), undefined, `${outside} lies outside 3..7`);
  t.is(m?.size, 4);
});

test('spans of different partitions or starts are kept apart', (t) => {
  const rows = [
    { pid: 1, lo: 0, hi: 1, base_offset: 0, hashes: blob(['a', 'b']) },
    { pid: 2, lo: 0, hi: 1, base_offset: 0, hashes: blob(['c', 'a']) },
  ];
  const idx = spanHashIndex(rows);
  t.deepEqual(idx.get('1:0')?.get(key('a')), [0]);
  t.deepEqual(idx.get('2:0')?.get(key('a')), [1]);
  t.is(idx.get('1:0')?.get(key('c')), undefined);
});
