import type { Message } from 'kafkajs';
import pg from 'pg';
import { caughtUp, committed, createTopic, produce, recordCount, storedFrames, uniqueName, VerdictLog } from '../helpers/kafka.js';
import { waitFor } from '../helpers/leaks.js';
import { startIngestStack } from '../helpers/stack.js';
import { kafkaDbTest } from '../helpers/kafkaDbTest.js';

const test = kafkaDbTest('ingress');

const KEYS = 32;

/** n distinct events over 32 keys, plus re-sends of every tenth (same transactionId, new Kafka offset). */
/** Whether a session of this test's database waits on a lock (a push behind the test's row lock). */
async function someoneWaitsOnALock(sql: pg.Pool): Promise<boolean> {
  const r = await sql.query<{ n: string }>(
    "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
  );
  return Number(r.rows[0]!.n) > 0;
}

function events(n: number, resendEvery = 10): { messages: Message[]; distinct: number; resent: number } {
  const messages: Message[] = [];
  const seq = new Array<number>(KEYS).fill(0);
  for (let i = 0; i < n; i++) {
    const k = i % KEYS;
    const s = seq[k]!++;
    messages.push({ key: `key-${k}`, value: JSON.stringify({ k, s }), headers: { transactionId: `tx-${k}-${s}` } });
  }
  const resends = messages.filter((_, i) => i % resendEvery === 0).map((m) => ({ ...m }));
  return { messages: [...messages, ...resends], distinct: n, resent: resends.length };
}

/** The log holds each distinct transactionId once, per-key in production order. */
function assertExact(
  t: { is: (a: unknown, b: unknown, m?: string) => void; deepEqual: (a: unknown, b: unknown, m?: string) => void },
  frames: Awaited<ReturnType<typeof storedFrames>>,
  distinct: number,
) {
  t.is(frames.length, distinct, 'each distinct transactionId stored exactly once');
  t.is(new Set(frames.map((f) => f.transactionId)).size, distinct);
  const byKey = new Map<string, number[]>();
  for (const f of frames) {
    const { s } = JSON.parse(f.payload.toString()) as { s: number };
    if (!byKey.has(f.partition)) byKey.set(f.partition, []);
    byKey.get(f.partition)!.push(s);
  }
  for (const [key, seqs] of byKey) {
    t.deepEqual(
      seqs,
      seqs.map((_, i) => i),
      `per-key order preserved for ${key}`,
    );
  }
}

test.serial('exactly-once ingest: 100k records over 32 keys with 10% re-sent transactionIds', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('exact');
  const group = uniqueName('g-exact');
  await createTopic(kafka, topic, 8);
  const { messages, distinct, resent } = events(100_000);
  await produce(kafka, topic, messages);
  t.is(await recordCount(kafka, topic), messages.length);
  const verdicts = new VerdictLog();
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, onCommitted: verdicts.observe });
  try {
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 240_000, 200);
    assertExact(t, await storedFrames(sql, topic), distinct);
    // Per Kafka record, its first verdict: queued for each distinct id, duplicate for each re-send.
    t.is(verdicts.records, messages.length);
    t.is(verdicts.count('queued'), distinct);
    t.is(verdicts.count('duplicate'), resent);
    t.is(verdicts.count('dead_lettered'), 0);
    const rec = stack.metrics.counter('queen_ingress_records_total', '');
    t.is(rec.get('queued'), distinct, 'a redelivery never queues again');
    t.log(`redelivered records answered again as duplicates: ${rec.get('duplicate') - resent}`);
  } finally {
    await stack.stop();
  }

  // Replay: reset the group to earliest and re-ingest: zero new messages, all duplicates.
  const admin = kafka.admin();
  await admin.connect();
  await admin.resetOffsets({ groupId: group, topic, earliest: true });
  await admin.disconnect();
  const replayed = new VerdictLog();
  const replay = await startIngestStack({ databaseUrl: db.url, topic, group, onCommitted: replayed.observe });
  try {
    await waitFor('the replay to commit the end of the topic', () => caughtUp(kafka, group, topic), 240_000, 200);
    const rec = replay.metrics.counter('queen_ingress_records_total', '');
    t.is(rec.get('queued'), 0, 'a replay writes nothing new');
    t.is(replayed.records, messages.length, 'every record answered');
    t.is(replayed.count('duplicate'), messages.length, 'all of them duplicates');
    assertExact(t, await storedFrames(sql, topic), distinct);
  } finally {
    await replay.stop();
  }
});

test.serial('two instances and a forced rebalance mid-stream give the same exact result', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('rebal');
  const group = uniqueName('g-rebal');
  await createTopic(kafka, topic, 8);
  const { messages, distinct } = events(30_000);
  const first = await startIngestStack({ databaseUrl: db.url, topic, group });
  let second: Awaited<ReturnType<typeof startIngestStack>> | undefined;
  try {
    await produce(kafka, topic, messages.slice(0, 10_000));
    await waitFor('the first instance to store something', async () => (await storedFrames(sql, topic)).length > 0, 60_000, 100);
    second = await startIngestStack({ databaseUrl: db.url, topic, group });
    await produce(kafka, topic, messages.slice(10_000, 20_000));
    // The first member leaves mid-stream: another rebalance.
    await first.stop();
    await produce(kafka, topic, messages.slice(20_000));
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 240_000, 200);
    assertExact(t, await storedFrames(sql, topic), distinct);
  } finally {
    await first.stop();
    await second?.stop();
  }
});

test.serial('bad records of many kinds are dead-lettered with reasons; good ones are ingested; no stall', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('bad');
  const group = uniqueName('g-bad');
  await createTopic(kafka, topic, 2);
  const bad: { m: Message; reason: RegExp }[] = [
    { m: { key: 'k', value: null }, reason: /null/ },
    { m: { key: Buffer.from([0xff, 0xfe, 0xfd]), value: '{}', headers: { transactionId: 'b1' } }, reason: /key is not valid UTF-8/ },
    { m: { key: 'x'.repeat(300), value: '{}', headers: { transactionId: 'b2' } }, reason: /partition must be at most 256/ },
    { m: { key: 'ctl\u0002key', value: '{}', headers: { transactionId: 'b3' } }, reason: /partition must not contain control/ },
    { m: { key: 'k', value: Buffer.alloc(5000, 0x61), headers: { transactionId: 'b4' } }, reason: /over the limit of 4096/ },
    { m: { key: 'k', value: '{}', headers: { transactionId: '' } }, reason: /transactionId must be a non-empty/ },
    { m: { key: 'k', value: '{}', headers: { transactionId: 't'.repeat(600) } }, reason: /transactionId must be at most 512/ },
    { m: { key: 'k', value: '{}', headers: { transactionId: 'tab\tid' } }, reason: /transactionId must not contain control/ },
    { m: { key: 'k', value: '{}', headers: { transactionId: Buffer.from([0xc3, 0x28]) } }, reason: /header is not valid UTF-8/ },
    { m: { key: 'k', value: JSON.stringify({ transactionId: 'j'.repeat(700) }) }, reason: /transactionId must be at most 512/ },
    { m: { key: 'k', value: '{}', headers: { transactionId: 'b5', traceparent: 'p'.repeat(2000) } }, reason: /traceContext is over/ },
    { m: { key: 'k', value: 'no id anywhere' }, reason: /no transactionId/ },
  ];
  const messages: Message[] = [];
  const good: string[] = [];
  bad.forEach((b, i) => {
    messages.push({ key: 'good', value: JSON.stringify({ s: i }), headers: { transactionId: `good-${i}` } });
    good.push(`good-${i}`);
    messages.push({ ...b.m, headers: { ...(b.m.headers ?? {}), 'test-case': String(i) } });
  });
  messages.push({ key: 'good', value: JSON.stringify({ s: bad.length }), headers: { transactionId: `good-${bad.length}` } });
  good.push(`good-${bad.length}`);
  await produce(kafka, topic, messages);

  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, maxPayloadBytes: 4096 });
  const dlq = kafka.consumer({ groupId: uniqueName('g-dlq') });
  try {
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 120_000, 100);
    const frames = await storedFrames(sql, topic);
    t.deepEqual(
      frames.map((f) => f.transactionId),
      good,
      'every good record ingested, in order',
    );

    const letters = new Map<number, { reason: string; topic: string; offset: string }>();
    await dlq.connect();
    await dlq.subscribe({ topic: `${topic}.dlq`, fromBeginning: true });
    await dlq.run({
      eachMessage: async ({ message }) => {
        const h = (n: string) => message.headers?.[n]?.toString() ?? '';
        letters.set(Number(h('test-case')), { reason: h('queen-dlq-reason'), topic: h('queen-dlq-topic'), offset: h('queen-dlq-offset') });
      },
    });
    await waitFor('every bad record in the dead-letter topic', () => letters.size === bad.length, 60_000, 100);
    bad.forEach((b, i) => {
      const l = letters.get(i);
      t.truthy(l, `case ${i} dead-lettered`);
      t.regex(l!.reason, b.reason, `case ${i} reason`);
      t.is(l!.topic, topic);
      t.regex(l!.offset, /^\d+$/);
    });
    t.is(stack.metrics.counter('queen_ingress_records_total', '').get('dead_lettered'), bad.length);
  } finally {
    await dlq.disconnect();
    await stack.stop();
  }
});

test.serial(
  'a partition whose push is blocked in PostgreSQL does not hold back fetching for the others; order and exactness hold',
  async (t) => {
    const { kafka, db, sql } = t.context;
    const topic = uniqueName('lanes');
    const group = uniqueName('g-lanes');
    await createTopic(kafka, topic, 2);
    const stack = await startIngestStack({ databaseUrl: db.url, topic, group });
    const locker = await sql.connect();
    try {
      // Log partitions "a" (Kafka partition 0) and "b" (Kafka partition 1) exist.
      await produce(kafka, topic, [
        { key: 'a', partition: 0, value: '{"s":0}', headers: { transactionId: 'a0' } },
        { key: 'b', partition: 1, value: '{"s":0}', headers: { transactionId: 'b0' } },
      ]);
      await waitFor('the first records committed', () => caughtUp(kafka, group, topic), 60_000, 50);

      // Hold log partition "a"'s row lock: its next push waits on it, inside its chunk.
      await locker.query('BEGIN');
      await locker.query(
        `SELECT 1 FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 AND lp.name = 'a' FOR UPDATE OF lp`,
        [topic],
      );
      await produce(kafka, topic, [{ key: 'a', partition: 0, value: '{"s":1}', headers: { transactionId: 'a1' } }]);
      await waitFor("a's push waiting on the lock", () => someoneWaitsOnALock(sql), 30_000, 50);
      // Records of the other partition, produced while "a" waits, are fetched, stored and committed meanwhile.
      await produce(kafka, topic, [
        { key: 'b', partition: 1, value: '{"s":1}', headers: { transactionId: 'b1' } },
        { key: 'b', partition: 1, value: '{"s":2}', headers: { transactionId: 'b2' } },
      ]);
      await waitFor(
        'partition 1 committed to its end while partition 0 waits',
        async () => (await committed(kafka, group, topic)).get(1) === 3,
        60_000,
        50,
      );
      t.is((await committed(kafka, group, topic)).get(0), 1, 'the waiting record is not committed');
      t.deepEqual(
        (await storedFrames(sql, topic)).map((f) => f.transactionId).sort(),
        ['a0', 'b0', 'b1', 'b2'],
        'a1 is not stored while its partition is locked',
      );

      // More records of "a" queue up behind the waiting one in its lane, then go in offset order.
      await produce(kafka, topic, [
        { key: 'a', partition: 0, value: '{"s":2}', headers: { transactionId: 'a2' } },
        { key: 'a', partition: 0, value: '{"s":1}', headers: { transactionId: 'a1' } },
        { key: 'a', partition: 0, value: '{"s":3}', headers: { transactionId: 'a3' } },
      ]);
      await locker.query('ROLLBACK');
      await waitFor('everything committed', () => caughtUp(kafka, group, topic), 60_000, 50);
      assertExact(t, await storedFrames(sql, topic), 7);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
      await stack.stop();
    }
  },
);

test.serial('a full lane pauses fetching and is counted; afterwards every record is stored once, in offset order', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('lanefull');
  const group = uniqueName('g-lanefull');
  await createTopic(kafka, topic, 1);
  // Chunks of 5 records; a lane holding 10 records is full.
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, ingress: { commitEvery: 5, maxRecordsQueued: 10 } });
  const locker = await sql.connect();
  const rec = (i: number): Message => ({ key: 'a', partition: 0, value: `{"s":${i}}`, headers: { transactionId: `a${i}` } });
  try {
    await produce(kafka, topic, [rec(0)]);
    await waitFor('the first record committed', () => caughtUp(kafka, group, topic), 60_000, 50);
    const waits = () => stack.metrics.counter('queen_ingress_lane_waits_total', '').get();
    t.is(waits(), 0, 'no wait while the lane keeps up');

    await locker.query('BEGIN');
    await locker.query(
      `SELECT 1 FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 AND lp.name = 'a' FOR UPDATE OF lp`,
      [topic],
    );
    await produce(kafka, topic, [rec(1)]);
    await waitFor("the lane's push waiting on the lock", () => someoneWaitsOnALock(sql), 30_000, 50);
    // 30 more records: 1 in flight + 6 chunks of 5 overrun the 10-record lane.
    await produce(
      kafka,
      topic,
      Array.from({ length: 30 }, (_, i) => rec(i + 2)),
    );
    await waitFor('a batch waiting for room in the full lane', () => waits() > 0, 30_000, 50);
    t.is((await committed(kafka, group, topic)).get(0), 1, 'nothing behind the lock is committed');

    await locker.query('ROLLBACK');
    await waitFor('everything committed', () => caughtUp(kafka, group, topic), 60_000, 50);
    const frames = await storedFrames(sql, topic);
    assertExact(t, frames, 32);
    t.deepEqual(
      frames.map((f) => f.transactionId),
      Array.from({ length: 32 }, (_, i) => `a${i}`),
      'stored in Kafka offset order',
    );
  } finally {
    await locker.query('ROLLBACK').catch(() => undefined);
    locker.release();
    await stack.stop();
  }
});

test.serial('committed offsets never pass what PostgreSQL holds (derived transactionIds)', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('derived');
  const group = uniqueName('g-derived');
  await createTopic(kafka, topic, 4);
  // No transactionId header and a non-object value: under missingId 'offset' (chosen here) the id is topic/partition/offset.
  const messages: Message[] = Array.from({ length: 8000 }, (_, i) => ({ key: `k${i % 16}`, value: String(i) }));
  await produce(kafka, topic, messages);
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, ingress: { missingId: 'offset' } });
  try {
    let checks = 0;
    await waitFor(
      'catch-up, checking the commit invariant on the way',
      async () => {
        const c = await committed(kafka, group, topic);
        const stored = new Set((await storedFrames(sql, topic)).map((f) => f.transactionId));
        for (const [p, off] of c) {
          for (let o = 0; o < off; o++)
            if (!stored.has(`${topic}/${p}/${o}`)) throw new Error(`offset ${o} of partition ${p} committed but not stored`);
        }
        checks++;
        return caughtUp(kafka, group, topic);
      },
      120_000,
      50,
    );
    t.true(checks > 0);
    t.is(await recordCount(kafka, topic), messages.length);
    t.is((await storedFrames(sql, topic)).length, messages.length);
  } finally {
    await stack.stop();
  }
});

test.serial('backpressure: over the fusion byte budget fetching pauses, then resumes; the result stays exact', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('pressure');
  const group = uniqueName('g-pressure');
  await createTopic(kafka, topic, 8);
  const { messages, distinct } = events(20_000, 1_000_000);
  await produce(kafka, topic, messages);
  // 8 partitions x 1000-record chunks of ~30-byte values overrun a 16 KiB budget at once.
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, maxInflightBytes: 16 * 1024 });
  try {
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 240_000, 200);
    assertExact(t, await storedFrames(sql, topic), distinct);
    t.true(stack.metrics.counter('queen_ingress_pauses_total', '').get() > 0, 'fetching was paused at least once');
    t.false(stack.fusion.overloaded, 'and resumed');
  } finally {
    await stack.stop();
  }
});
