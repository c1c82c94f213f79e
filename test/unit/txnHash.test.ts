import test from 'ava';
import { hashBytes, hashString, hashTransactionId, HASH_BYTES, writeHash, writeHashAt } from '../../src/util/txnHash.js';

// The broker hashes a pushed transactionId from its UTF-8 bytes (the frame
// carries them) and an acked or browsed one from the string: both must give
// the same 16 bytes, or an ack would not find its message.
test('a transactionId hashes the same from its string as from its UTF-8 bytes', (t) => {
  const ids = ['order-1', '', 'é€ü', '\u{1F600}-emoji', 'lone \uD800 high', 'lone \uDC00 low', 'x'.repeat(5000), 'nul\u0000inside'];
  for (const id of ids) {
    t.is(hashString(id), hashBytes(Buffer.from(id, 'utf8')), JSON.stringify(id.slice(0, 20)));
    const out = hashTransactionId(id);
    t.is(out.length, HASH_BYTES);
    t.is(out.readBigUInt64BE(0), hashBytes(Buffer.from(id, 'utf8')) >> 64n);
  }
  t.not(hashString('a'), hashString('b'));
});

// The stored form: 16 bytes, big-endian, high half first (what SQL compares).
test('a hash is written as 16 big-endian bytes, alone or in a run, at any position', (t) => {
  const hs = [0n, 1n, (1n << 128n) - 1n, 0x0123456789abcdef_fedcba9876543210n, hashString('order-1')];
  const hex = (h: bigint): string => h.toString(16).padStart(32, '0');
  const one = Buffer.alloc(3 + HASH_BYTES);
  for (const h of hs) {
    writeHash(h, one, 3);
    t.is(one.subarray(3).toString('hex'), hex(h));
  }
  const run = Buffer.alloc(5 + hs.length * HASH_BYTES);
  const view = new DataView(run.buffer, run.byteOffset + 5);
  hs.forEach((h, i) => writeHashAt(view, i * HASH_BYTES, h));
  t.is(run.subarray(5).toString('hex'), hs.map(hex).join(''));
  t.is(run.subarray(0, 5).toString('hex'), '0000000000', 'nothing before `at` is touched');
});
