import test from 'ava';
import { ValidationError } from '../../src/errors.js';
import { checkPartitionName, checkQueueName } from '../../src/engine/limits.js';

// Valid names are remembered (limits.ts, NameMemo) so a repeated name skips
// the checks. What must hold: an invalid name is refused every time, however
// many names were checked before it, including across the memo starting over.

const INVALID_PARTITIONS: unknown[] = ['', 'a\x1fb', 'tab\there', 'x'.repeat(257), '\ud800lone', 7, {}];
const INVALID_QUEUES: unknown[] = ['', '.', '..', 'has space', 'q/1', 'x'.repeat(129), 7, null];

test('valid names pass every time; invalid names are refused every time, before and after 10 000 valid names', (t) => {
  for (let round = 0; round < 3; round++) {
    for (const p of INVALID_PARTITIONS)
      t.throws(() => checkPartitionName(p), { instanceOf: ValidationError }, `partition ${JSON.stringify(p)}`);
    for (const q of INVALID_QUEUES) t.throws(() => checkQueueName(q), { instanceOf: ValidationError }, `queue ${JSON.stringify(q)}`);
    // More distinct valid names than the memo holds: it starts over at least twice.
    for (let i = 0; i < 10_000; i++) {
      t.is(checkPartitionName(`p-${round}-${i}`), `p-${round}-${i}`);
      t.is(checkQueueName(`q-${round}-${i}`), `q-${round}-${i}`);
    }
    t.is(checkPartitionName('ü-key'), 'ü-key');
    t.is(checkPartitionName('ü-key'), 'ü-key');
    t.is(checkPartitionName(undefined), 'Default');
  }
});

test('a name that is a valid name with one bad character added is refused after the valid one was remembered', (t) => {
  t.is(checkPartitionName('order-17'), 'order-17');
  t.throws(() => checkPartitionName('order-17\x00'), { instanceOf: ValidationError });
  t.is(checkQueueName('orders'), 'orders');
  t.throws(() => checkQueueName('orders '), { instanceOf: ValidationError });
});
