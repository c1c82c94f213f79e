import test from 'ava';
import { hashBytes, hashString, hashTransactionId, HASH_BYTES } from '../../src/util/txnHash.js';

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
