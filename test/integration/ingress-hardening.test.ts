import type { Kafka, KafkaMessage } from 'kafkajs';
import { CONNECT_HEADERS, QUEEN_HEADERS } from '../../src/ingress/deadLetter.js';
import { codecStats } from '../../src/ingress/codecs.js';
import { HttpApi } from '../../src/http/server.js';
import { javaProduce } from '../helpers/javaProducer.js';
import { brokers, caughtUp, committed, createTopic, produce, storedFrames, uniqueName } from '../helpers/kafka.js';
import { waitFor } from '../helpers/leaks.js';
import { startIngestStack } from '../helpers/stack.js';
import { kafkaDbTest } from '../helpers/kafkaDbTest.js';

const test = kafkaDbTest('ingress_hardening');

/** Reads every record of a topic from the beginning until `n` arrived. */
async function readTopic(kafka: Kafka, topic: string, n: number): Promise<KafkaMessage[]> {
  const got: KafkaMessage[] = [];
  const c = kafka.consumer({ groupId: uniqueName('g-read') });
  await c.connect();
  try {
    await c.subscribe({ topic, fromBeginning: true });
    await c.run({ eachMessage: async ({ message }) => void got.push(message) });
    await waitFor(`${n} records in ${topic}`, () => got.length >= n, 60_000, 50);
  } finally {
    await c.disconnect();
  }
  return got;
}

test.serial("lz4, zstd and snappy batches from Kafka's Java producer are each ingested exactly once", async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('codecs');
  const group = uniqueName('g-codecs');
  await createTopic(kafka, topic, 3);
  const PER_CODEC = 400;
  const codecs = ['lz4', 'zstd', 'snappy'] as const;
  const before = codecStats().decoded;
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group });
  try {
    for (const codec of codecs) {
      const records = Array.from({ length: PER_CODEC }, (_, i) => ({
        key: `${codec}-k${i % 8}`,
        value: `{"codec":"${codec}","s":${Math.floor(i / 8)}}`,
        headers: { transactionId: `${codec}-${i}` },
      }));
      // Every tenth record sent twice: the second copy must come back a duplicate.
      const resends = records.filter((_, i) => i % 10 === 0);
      await javaProduce(brokers(), topic, [...records, ...resends], { compression: codec });
    }
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 120_000, 100);
    const frames = await storedFrames(sql, topic);
    t.is(frames.length, PER_CODEC * codecs.length, 'each distinct record stored once');
    t.is(new Set(frames.map((f) => f.transactionId)).size, PER_CODEC * codecs.length);
    for (const codec of codecs) {
      t.is(frames.filter((f) => f.transactionId.startsWith(`${codec}-`)).length, PER_CODEC, `${codec}: all records`);
      t.true(codecStats().decoded[codec] > before[codec], `${codec}: the batches really were ${codec}-compressed`);
      for (let k = 0; k < 8; k++) {
        const seqs = frames
          .filter((f) => f.partition === `${codec}-k${k}`)
          .map((f) => (JSON.parse(f.payload.toString()) as { s: number }).s);
        t.deepEqual(
          seqs,
          seqs.map((_, i) => i),
          `${codec}-k${k}: per-key order`,
        );
      }
    }
    const rec = stack.metrics.counter('queen_ingress_records_total', '');
    t.is(rec.get('dead_lettered'), 0);
    await waitFor('ready', () => stack.ingress.status().ready, 30_000, 50);
  } finally {
    await stack.stop();
  }
});

test.serial('a consumer crash is counted, shows in readiness, and the consumer restarts with backoff and resumes', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('crash');
  const group = uniqueName('g-crash');
  await createTopic(kafka, topic, 2);
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, ingress: { consumerRetries: 1, restartBackoffMaxMs: 2_000 } });
  const http = new HttpApi({
    fusion: stack.fusion,
    pool: sql,
    metrics: stack.metrics,
    maxBodyBytes: 1 << 20,
    host: '127.0.0.1',
    port: 0,
    ingressReadiness: () => stack.ingress.status(),
  });
  await http.start();
  try {
    await produce(kafka, topic, [{ key: 'a', value: '{"n":0}', headers: { transactionId: 'before' } }]);
    await waitFor('the first record committed', () => caughtUp(kafka, group, topic), 60_000, 50);
    await waitFor('ready', async () => (await fetch(`${http.url}/health/ready`)).status === 200, 30_000, 50);

    // A condition no retry can fix: the push function is gone. Batches fail non-retriably -> the consumer crashes.
    await sql.query('ALTER FUNCTION queen.log_push_v12 RENAME TO log_push_v12_away');
    t.teardown(() => sql.query('ALTER FUNCTION IF EXISTS queen.log_push_v12_away RENAME TO log_push_v12').catch(() => undefined));
    await produce(kafka, topic, [{ key: 'a', value: '{"n":1}', headers: { transactionId: 'during' } }]);
    const crashes = stack.metrics.counter('queen_ingress_consumer_crashes_total', '');
    await waitFor('a crash', () => crashes.get() >= 1, 60_000, 50);
    const ready = await fetch(`${http.url}/health/ready`);
    t.is(ready.status, 503, 'readiness reflects the crashed consumer');
    const body = (await ready.json()) as { status: string; checks: { kafka: { crashes: number; reasons: string[] } } };
    t.is(body.status, 'not_ready');
    t.true(body.checks.kafka.crashes >= 1);
    t.is((await fetch(`${http.url}/health/live`)).status, 200, 'liveness is unaffected');
    t.is((await fetch(`${http.url}/health`)).status, 503, '/health answers as readiness');
    t.regex(stack.ingress.status().lastCrash!.error, /log_push_v12/);
    t.regex(await (await fetch(`${http.url}/metrics`)).text(), /queen_ingress_consumer_ready 0/);
    await waitFor('a restart', () => stack.metrics.counter('queen_ingress_consumer_restarts_total', '').get() >= 1, 30_000, 50);

    await sql.query('ALTER FUNCTION queen.log_push_v12_away RENAME TO log_push_v12');
    await waitFor('the restarted consumer to commit the record', () => caughtUp(kafka, group, topic), 90_000, 100);
    await waitFor('ready again', async () => (await fetch(`${http.url}/health/ready`)).status === 200, 30_000, 50);
    const frames = await storedFrames(sql, topic);
    t.deepEqual(frames.map((f) => f.transactionId).sort(), ['before', 'during'], 'nothing lost, nothing doubled');
  } finally {
    await http.stop();
    await stack.stop();
  }
});

test.serial("dead letters carry Kafka Connect's headers and go to the topic's own DLQ override", async (t) => {
  const { kafka, db } = t.context;
  const topic = uniqueName('dlqh');
  const dlq = uniqueName('custom-dlq');
  const group = uniqueName('g-dlqh');
  await createTopic(kafka, topic, 1);
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, ingress: { topics: [{ topic, queue: topic, dlq }] } });
  try {
    await produce(kafka, topic, [
      { key: 'a', value: '{"ok":1}', headers: { transactionId: 'good-1' } },
      { key: 'a', value: null, headers: { transactionId: 'tomb' } },
      { key: 'a', value: '{"ok":2}', headers: { transactionId: 'good-2' } },
    ]);
    await waitFor('caught up', () => caughtUp(kafka, group, topic), 60_000, 50);
    const originals = (await readTopic(kafka, topic, 3)).sort((a, b) => Number(a.offset) - Number(b.offset));
    const [letter] = await readTopic(kafka, dlq, 1);
    const h = (k: string) => letter!.headers![k]?.toString();
    t.is(h(CONNECT_HEADERS.topic), topic);
    t.is(h(CONNECT_HEADERS.partition), '0');
    t.is(h(CONNECT_HEADERS.offset), '1');
    t.is(h(CONNECT_HEADERS.connectorName), group, 'the connector is the consumer group');
    t.is(h(CONNECT_HEADERS.taskId), '0');
    t.is(h(CONNECT_HEADERS.stage), 'VALUE_CONVERTER');
    t.is(h(CONNECT_HEADERS.className), 'queen.ingress.RecordMapping');
    t.is(h(CONNECT_HEADERS.exceptionClass), 'ValidationError');
    t.regex(h(CONNECT_HEADERS.exceptionMessage)!, /tombstone/);
    t.regex(h(CONNECT_HEADERS.exceptionStacktrace)!, /^ValidationError: .*tombstone[^]*at queen\.ingress\.RecordMapping/);
    t.true(Math.abs(Number(h(QUEEN_HEADERS.deadLetteredAt)) - Date.now()) < 600_000, 'when it was dead-lettered, in ms');
    t.is(h(QUEEN_HEADERS.originalTimestamp), originals[1]!.timestamp, "the original record's timestamp");
    t.is(letter!.timestamp, originals[1]!.timestamp, "the dead letter's own timestamp is the original's, as in Connect");
    t.regex(h('queen-dlq-reason')!, /tombstone/);
    t.is(h('transactionId'), 'tomb', 'the original headers are kept');
    t.is(stack.metrics.counter('queen_ingress_records_total', '').get('queued'), 2);
  } finally {
    await stack.stop();
  }
});

test.serial('errors tolerance "none": a bad record halts its partition visibly; other partitions go on', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('halt');
  const group = uniqueName('g-halt');
  await createTopic(kafka, topic, 2);
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, ingress: { errorsTolerance: 'none' } });
  try {
    await produce(kafka, topic, [
      { partition: 0, key: 'p0', value: '{"n":1}', headers: { transactionId: 'h-ok-0' } },
      { partition: 0, key: 'p0', value: null, headers: { transactionId: 'h-bad' } },
      { partition: 0, key: 'p0', value: '{"n":2}', headers: { transactionId: 'h-after' } },
      { partition: 1, key: 'p1', value: '{"n":1}', headers: { transactionId: 'h-ok-1' } },
    ]);
    await waitFor('a halted partition', () => stack.ingress.status().halted.length === 1, 60_000, 50);
    await waitFor('partition 1 committed', async () => (await committed(kafka, group, topic)).get(1) === 1, 60_000, 50);
    const status = stack.ingress.status();
    t.false(status.ready, 'readiness is false while a partition is halted');
    t.like(status.halted[0], { topic, partition: 0, offset: '1' });
    t.regex(status.reasons.join(' '), /halted at offset 1/);
    t.regex(await stack.metrics.render(), /queen_ingress_halted_partitions 1/);
    const c = await committed(kafka, group, topic);
    t.true((c.get(0) ?? -1) < 2, 'nothing committed past the bad record');
    const stored = (await storedFrames(sql, topic)).map((f) => f.transactionId);
    t.false(stored.includes('h-after'), 'the partition stopped at the bad record');
    t.true(stored.includes('h-ok-1'));
    t.is(stack.metrics.counter('queen_ingress_dead_letters_total', '').get(), 0, 'not dead-lettered');
  } finally {
    await stack.stop();
  }
});
