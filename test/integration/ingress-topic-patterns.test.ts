import { loadConfig } from '../../src/config.js';
import { LagMonitor } from '../../src/ingress/lagMonitor.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { brokers, caughtUp, committed, createTopic, produce, storedFrames, uniqueName } from '../helpers/kafka.js';
import { waitFor } from '../helpers/leaks.js';
import { startIngestStack } from '../helpers/stack.js';
import { kafkaDbTest } from '../helpers/kafkaDbTest.js';

const test = kafkaDbTest('ingress_patterns');

test('a /regex/ topic consumes the two topics whose names match it, not a third, and their mappings apply', async (t) => {
  const { db, sql, kafka } = t.context;
  const prefix = uniqueName('pat'); // letters, digits and "-": nothing a regex reads specially
  const a = `${prefix}-a`;
  const b = `${prefix}-b`;
  const c = `${prefix}-c`;
  // Matched by the regex too, were dead-letter topics not excluded: the ingress must not consume its own dead letters.
  const aDlq = `${a}.dlq`;
  const group = uniqueName('g-pat');
  for (const topic of [a, b, c, aDlq]) await createTopic(kafka, topic, 2);
  const n = 40;
  const ids = (topic: string) => Array.from({ length: n }, (_, i) => `${topic}-ev-${i}`);
  // Topic a carries its ids in a JSON field the pattern's mapping names; topic b in a header its own mapping names.
  // Under the default mapping neither would yield an id, and the records would be dead-lettered.
  await produce(
    kafka,
    a,
    ids(a).map((id, i) => ({ key: `k${i % 4}`, value: JSON.stringify({ eventId: id }) })),
  );
  await produce(
    kafka,
    b,
    ids(b).map((id, i) => ({ key: `k${i % 4}`, value: JSON.stringify({ i }), headers: { eventId: id } })),
  );
  await produce(
    kafka,
    c,
    ids(c).map((id) => ({ value: JSON.stringify({ eventId: id }) })),
  );
  await produce(kafka, aDlq, [{ value: JSON.stringify({ eventId: 'a-dead-letter' }) }]);

  const cfg = loadConfig({
    KAFKA_BROKERS: brokers().join(','),
    QUEEN_INGRESS_TOPICS: `/${prefix}-(a|b).*/`,
    QUEEN_INGRESS_MAPPING: JSON.stringify({
      [`/${prefix}-(a|b).*/`]: { transactionId: 'json:/eventId' },
      [b]: { transactionId: 'header:eventId' },
    }),
    QUEEN_KAFKA_CONSUMER: JSON.stringify({ maxBytes: 5 * 1024 * 1024, minBytes: 1, rebalanceTimeout: 60_000, readUncommitted: false }),
  });
  const stack = await startIngestStack({
    databaseUrl: db.url,
    topic: a,
    group,
    ingress: { topics: cfg.ingressTopics, topicPatterns: cfg.ingressTopicPatterns, consumer: cfg.kafkaConsumer },
  });
  try {
    t.deepEqual(stack.ingress.topicNames(), [a, b], 'the regex matched a and b, not c nor a dead-letter topic');
    await waitFor(
      'the group to commit the ends of both matched topics',
      async () => (await caughtUp(kafka, group, a)) && (await caughtUp(kafka, group, b)),
      120_000,
      200,
    );
    t.deepEqual((await storedFrames(sql, a)).map((f) => f.transactionId).sort(), ids(a).sort(), 'a: every id, from the pattern mapping');
    t.deepEqual((await storedFrames(sql, b)).map((f) => f.transactionId).sort(), ids(b).sort(), "b: every id, from b's own mapping");
    t.is((await storedFrames(sql, c)).length, 0, 'c: not consumed');
    t.is((await storedFrames(sql, aDlq)).length, 0, 'the dead-letter topic: not consumed');
    t.deepEqual(
      [...(await committed(kafka, group, c)).values()].filter((o) => o >= 0),
      [],
      'c: nothing committed for the group',
    );
    t.is(stack.metrics.counter('queen_ingress_dead_letters_total', '').get(), 0, 'no record was dead-lettered');
    // The lag monitor reads the topics the pattern found (as the service wires it), and sees them caught up.
    const lag = new LagMonitor(
      { brokers: brokers(), groupId: group, topics: () => stack.ingress.topicNames(), intervalMs: 100 },
      silentLogger,
      new MetricsRegistry(),
    );
    await lag.start();
    try {
      const read = await waitFor(
        'lag read for both matched topics',
        () => (lag.snapshot().length === 4 ? lag.snapshot() : undefined),
        60_000,
        50,
      );
      t.deepEqual([...new Set(read.map((p) => p.topic))].sort(), [a, b]);
      t.is(lag.total(), 0n);
    } finally {
      await lag.stop();
    }
  } finally {
    await stack.stop();
  }
});

test('a topic created while running that a /regex/ matches is consumed after the next refresh; the others lose and double nothing', async (t) => {
  const { db, sql, kafka } = t.context;
  const prefix = uniqueName('live');
  const a = `${prefix}-a`;
  const b = `${prefix}-b`;
  const group = uniqueName('g-live');
  await createTopic(kafka, a, 2);
  const sent = new Map<string, string[]>([
    [a, []],
    [b, []],
  ]);
  const send = async (topic: string, n: number) => {
    const ids = Array.from({ length: n }, (_, i) => `${topic}-ev-${sent.get(topic)!.length + i}`);
    await produce(
      kafka,
      topic,
      ids.map((id, i) => ({ key: `k${i % 4}`, value: JSON.stringify({ transactionId: id }) })),
    );
    sent.get(topic)!.push(...ids);
  };
  await send(a, 30);
  const cfg = loadConfig({ KAFKA_BROKERS: brokers().join(','), QUEEN_INGRESS_TOPICS: `/${prefix}-.+/` });
  const stack = await startIngestStack({
    databaseUrl: db.url,
    topic: a,
    group,
    ingress: { topics: cfg.ingressTopics, topicPatterns: cfg.ingressTopicPatterns, topicRefreshMs: 1_000 },
  });
  try {
    t.deepEqual(stack.ingress.topicNames(), [a], 'at start only a exists');
    await waitFor('a caught up', () => caughtUp(kafka, group, a), 120_000, 200);
    await createTopic(kafka, b, 2);
    await send(b, 30);
    // a keeps receiving while the consumer is replaced by one subscribed to b too.
    let rounds = 0;
    await waitFor(
      'b consumed and caught up',
      async () => {
        if (rounds++ < 200) await send(a, 5);
        return stack.ingress.topicNames().includes(b) && (await caughtUp(kafka, group, b));
      },
      120_000,
      100,
    );
    await send(a, 10);
    await waitFor('a caught up after the resubscription', () => caughtUp(kafka, group, a), 120_000, 200);
    t.deepEqual(stack.ingress.topicNames(), [a, b]);
    const ids = async (queue: string) => (await storedFrames(sql, queue)).map((f) => f.transactionId).sort();
    t.deepEqual(await ids(b), [...sent.get(b)!].sort(), 'b: every record, once');
    t.deepEqual(await ids(a), [...sent.get(a)!].sort(), 'a: every record sent before, during and after the resubscription, once');
    const admin = kafka.admin();
    await admin.connect();
    try {
      t.true((await admin.listTopics()).includes(`${b}.dlq`), "b's dead-letter topic was created with it");
    } finally {
      await admin.disconnect();
    }
    t.is(stack.metrics.counter('queen_ingress_dead_letters_total', '').get(), 0);
  } finally {
    await stack.stop();
  }
});
