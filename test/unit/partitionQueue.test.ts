import test from 'ava';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { PartitionQueue } from '../../src/retention/partitionQueue.js';

test('a partition is handed out once until its step is done; a full batch goes to the tail', (t) => {
  const q = new PartitionQueue();
  q.add([1, 2, 3]);
  t.is(q.take(), 1);
  t.is(q.take(), 2);
  q.add([1, 2, 4]); // in flight: ignored; 4 is new
  t.is(q.inFlightCount, 2);
  q.done(1, true); // more: back at the tail, behind 3 and 4
  t.is(q.take(), 3);
  t.is(q.take(), 4);
  t.is(q.take(), 1);
  t.is(q.take(), undefined, 'nothing queued: 2, 3, 4 and 1 are all in flight');
  q.done(2, false);
  q.done(3, false);
  q.done(4, false);
  q.done(1, false);
  t.is(q.queuedCount + q.inFlightCount, 0);
  t.throws(() => q.done(1, false), { message: /not in flight/ });
  q.add([2]); // finished partitions may be listed again (the next page or pass)
  t.is(q.take(), 2);
});

test('round robin over many revisits keeps every partition once in the list', (t) => {
  const q = new PartitionQueue();
  q.add(Array.from({ length: 2000 }, (_, i) => i));
  const seen: number[] = [];
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 2000; i++) {
      const id = q.take()!;
      seen.push(id);
      q.done(id, round < 2);
    }
  }
  t.is(q.take(), undefined);
  t.deepEqual(
    seen.slice(4000),
    Array.from({ length: 2000 }, (_, i) => i),
    'third round in the original order',
  );
});

test('QUEEN_RETENTION_CONCURRENCY: default 8, 1-32', (t) => {
  t.is(loadConfig({}).retentionConcurrency, 8);
  t.is(loadConfig({ QUEEN_RETENTION_CONCURRENCY: '1' }).retentionConcurrency, 1);
  for (const bad of ['0', '33', 'two'])
    t.throws(() => loadConfig({ QUEEN_RETENTION_CONCURRENCY: bad }), {
      instanceOf: ConfigError,
      message: /QUEEN_RETENTION_CONCURRENCY must be an integer between 1 and 32/,
    });
});

test('QUEEN_RETENTION_VACUUM_INTERVAL_MS: default 10 s, 0 turns the leader vacuum off', (t) => {
  t.is(loadConfig({}).retentionVacuumIntervalMs, 10_000);
  t.is(loadConfig({ QUEEN_RETENTION_VACUUM_INTERVAL_MS: '0' }).retentionVacuumIntervalMs, 0);
  for (const bad of ['-1', '86400001', 'often'])
    t.throws(() => loadConfig({ QUEEN_RETENTION_VACUUM_INTERVAL_MS: bad }), {
      instanceOf: ConfigError,
      message: /QUEEN_RETENTION_VACUUM_INTERVAL_MS must be an integer between 0 and 86400000/,
    });
});
