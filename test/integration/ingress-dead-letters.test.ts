import kafkajs, { type Kafka, type KafkaMessage } from 'kafkajs';
import pg from 'pg';
import { pino, type Logger } from 'pino';
import { parseMappings } from '../../src/config.js';
import { HttpApi } from '../../src/http/server.js';
import { CONNECT_HEADERS, QUEEN_HEADERS } from '../../src/ingress/deadLetter.js';
import type { KafkaIngressOptions } from '../../src/ingress/kafkaIngress.js';
import { javaProduce, type JavaRecord } from '../helpers/javaProducer.js';
import { brokers, caughtUp, committed, createTopic, storedFrames, uniqueName } from '../helpers/kafka.js';
import { waitFor } from '../helpers/leaks.js';
import { startIngestStack, type IngestStack } from '../helpers/stack.js';
import { kafkaDbTest } from '../helpers/kafkaDbTest.js';

const { ConfigResourceTypes, Partitioners } = kafkajs;

/**
 * Records as Kafka's own Java producer sends them, which the dead-letter path
 * must always be able to write (or, when it cannot, must halt visibly):
 * null header values, an oversized compressed value, Confluent-framed values,
 * records without a transactionId under each policy, and a dead-letter topic
 * that refuses every write (a max.message.bytes smaller than any dead letter,
 * a real broker-side refusal).
 */

const test = kafkaDbTest('ingress_dead_letters');

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
  return got.sort((a, b) => Number(a.offset) - Number(b.offset));
}

/** A header as kafkajs decoded it: null for Kafka's null value (kafkajs's types leave null out), undefined when absent. */
function rawHeader(m: KafkaMessage, name: string): unknown {
  const headers: Record<string, unknown> = m.headers ?? {};
  return name in headers ? headers[name] : undefined;
}

/** A logger whose lines the test reads. */
function capturingLogger(): { logger: Logger; lines: { level: number; msg: string; [k: string]: unknown }[] } {
  const lines: { level: number; msg: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as { level: number; msg: string }) });
  return { logger, lines };
}

/** A Confluent-framed value (magic byte 0, 4-byte big-endian schema id), as text the console producer sends byte for byte. */
function framed(schemaId: number, payload: string): string {
  const h = Buffer.alloc(5);
  h.writeUInt32BE(schemaId, 1);
  return h.toString('latin1') + payload;
}

async function createDlqTopic(kafka: Kafka, topic: string, maxMessageBytes: number): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      topics: [{ topic, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: String(maxMessageBytes) }] }],
      waitForLeaders: true,
    });
  } finally {
    await admin.disconnect();
  }
}

async function setMaxMessageBytes(kafka: Kafka, topic: string, bytes: number): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'max.message.bytes', value: String(bytes) }] }],
    });
  } finally {
    await admin.disconnect();
  }
}

async function withHttp<T>(stack: IngestStack, sql: pg.Pool, fn: (url: string) => Promise<T>): Promise<T> {
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
    return await fn(http.url);
  } finally {
    await http.stop();
  }
}

/** Keys that the Java client's (and kafkajs's default) murmur2 partitioner puts on partitions 0, 1, ... of an n-partition topic. */
function keysOnPartitions(n: number): string[] {
  const partitioner = Partitioners.DefaultPartitioner();
  const partitionMetadata = Array.from({ length: n }, (_, i) => ({
    partitionId: i,
    leader: 0,
    replicas: [0],
    isr: [0],
    partitionErrorCode: 0,
  }));
  const keys: string[] = [];
  for (let p = 0; p < n; p++) {
    for (let i = 0; ; i++) {
      const key = `key-${i}`;
      if (partitioner({ topic: 't', partitionMetadata, message: { key, value: null } }) === p) {
        keys.push(key);
        break;
      }
    }
  }
  return keys;
}

function halted(metricsText: string): number {
  const m = /^queen_ingress_halted_partitions (\d+)$/m.exec(metricsText);
  return m ? Number(m[1]) : NaN;
}

test.serial('null header values (also on a tombstone) are carried as null into the dead letter; nothing stalls', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('nullh');
  const group = uniqueName('g-nullh');
  await createTopic(kafka, topic, 1);
  const records: JavaRecord[] = [
    { key: 'k', value: '{"n":0}', headers: { transactionId: 'n-0', traceparent: null } },
    { key: 'k', value: null, headers: { traceparent: null, note: null } },
    { key: 'k', value: 'no id here', headers: { transactionId: null } },
    { key: 'k', value: '{"n":3}', headers: { transactionId: 'n-3', empty: null } },
  ];
  await javaProduce(brokers(), topic, records, { compression: 'none' });
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group });
  try {
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 120_000, 100);
    t.deepEqual(
      (await storedFrames(sql, topic)).map((f) => f.transactionId),
      ['n-0', 'n-3'],
      'the good records are stored; a null traceparent is no trace context',
    );
    const letters = await readTopic(kafka, `${topic}.dlq`, 2);
    t.is(letters.length, 2);
    const [tomb, noId] = letters;
    t.is(tomb!.headers![CONNECT_HEADERS.offset]!.toString(), '1');
    t.is(tomb!.value, null, 'a tombstone stays a tombstone');
    t.is(rawHeader(tomb!, 'traceparent'), null, 'the null header value is carried as null');
    t.is(rawHeader(tomb!, 'note'), null);
    t.regex(tomb!.headers![CONNECT_HEADERS.exceptionMessage]!.toString(), /tombstone/);
    t.is(rawHeader(noId!, 'transactionId'), null, 'a null transactionId header is carried as null');
    t.regex(noId!.headers![CONNECT_HEADERS.exceptionMessage]!.toString(), /no transactionId/);
    t.is(noId!.headers![CONNECT_HEADERS.stage]!.toString(), 'TRANSFORMATION');
    t.is(stack.ingress.status().halted.length, 0);
  } finally {
    await stack.stop();
  }
});

test.serial('an oversized gzip record: its dead letter is cut to fit the topic, later records land, the offset advances', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('big');
  const group = uniqueName('g-big');
  await createTopic(kafka, topic, 1);
  const big = 'x'.repeat(2 * 1024 * 1024 - 16) + 'END-OF-VALUE';
  const records: JavaRecord[] = [
    { key: 'k', value: '{"n":0}', headers: { transactionId: 'b-0' } },
    { key: 'k', value: big, headers: { transactionId: 'b-big' } },
    { key: 'k', value: '{"n":2}', headers: { transactionId: 'b-2' } },
  ];
  // The producer checks the uncompressed size against max.request.size; the broker checks the gzip batch (a few KiB).
  await javaProduce(brokers(), topic, records, { compression: 'gzip', extraProps: { 'max.request.size': String(8 * 1024 * 1024) } });
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, maxPayloadBytes: 64 * 1024 });
  try {
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 120_000, 100);
    t.deepEqual((await committed(kafka, group, topic)).get(0), 3, 'committed past the oversized record');
    t.deepEqual(
      (await storedFrames(sql, topic)).map((f) => f.transactionId),
      ['b-0', 'b-2'],
    );
    const [letter] = await readTopic(kafka, `${topic}.dlq`, 1);
    const h = (k: string) => letter!.headers![k]?.toString();
    t.regex(h(CONNECT_HEADERS.exceptionMessage)!, /over the limit of 65536/);
    t.is(h(CONNECT_HEADERS.exceptionClass), 'RejectedByLog');
    t.is(h(CONNECT_HEADERS.stage), 'TASK_PUT');
    t.is(h(QUEEN_HEADERS.truncated), 'value');
    t.is(h(QUEEN_HEADERS.originalValueBytes), String(Buffer.byteLength(big)));
    t.is(h('transactionId'), 'b-big', 'original headers kept');
    const limit = 1048588; // the broker's default message.max.bytes, which the auto-created dead-letter topic inherits
    t.true(letter!.value!.length > 900 * 1024 && letter!.value!.length < limit, `cut to fit: ${letter!.value!.length} bytes`);
    t.true(big.startsWith(letter!.value!.toString()), 'the kept part is the start of the value');
    t.is(stack.metrics.counter('queen_ingress_dead_letter_failures_total', '').get(), 0, 'the first write fitted');
  } finally {
    await stack.stop();
  }
});

test.serial(
  'Confluent-framed values without a registry: JSON Schema stored with its id, Avro and Protobuf dead-lettered, nothing under an offset id',
  async (t) => {
    const { kafka, db, sql } = t.context;
    const topic = uniqueName('framed');
    const group = uniqueName('g-framed');
    await createTopic(kafka, topic, 1);
    const records: JavaRecord[] = [
      { key: 'k', value: framed(1, '{"transactionId":"js-1","n":1}') },
      // A producer's retry of the same event as a new Kafka record: a duplicate, not a second copy.
      { key: 'k', value: framed(1, '{"transactionId":"js-1","n":1}') },
      // Avro binary: a zigzag string length, then bytes (no tab, newline or byte over 0x7f).
      { key: 'k', value: framed(2, '\u0004a1\u0002') },
      // Protobuf binary: the message indexes (one 0 byte: the first message), then field 2 as the string "p1".
      { key: 'k', value: framed(3, '\u0000\u0012\u0002p1') },
      { key: 'k', value: framed(1, '{"transactionId":"js-2","n":2}') },
    ];
    await javaProduce(brokers(), topic, records, { compression: 'lz4' });
    // Even with the offset fallback chosen, a framed value is never stored under an offset id.
    const stack = await startIngestStack({ databaseUrl: db.url, topic, group, ingress: { missingId: 'offset' } });
    try {
      await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 120_000, 100);
      const frames = await storedFrames(sql, topic);
      t.deepEqual(
        frames.map((f) => f.transactionId),
        ['js-1', 'js-2'],
      );
      t.deepEqual(
        frames.map((f) => f.payload.toString()),
        ['{"transactionId":"js-1","n":1}', '{"transactionId":"js-2","n":2}'],
        'stored as JSON, without the 5-byte header',
      );
      t.false(
        frames.some((f) => f.transactionId.startsWith(`${topic}/`)),
        'nothing stored under an offset id',
      );
      const rec = stack.metrics.counter('queen_ingress_records_total', '');
      t.is(rec.get('duplicate'), 1, 'the re-sent framed record is a duplicate');
      const [letter, protoLetter] = await readTopic(kafka, `${topic}.dlq`, 2);
      t.is(letter!.headers![CONNECT_HEADERS.offset]!.toString(), '2');
      t.regex(letter!.headers![CONNECT_HEADERS.exceptionMessage]!.toString(), /Confluent-framed value \(schema id 2\) is not JSON/);
      t.is(letter!.headers![CONNECT_HEADERS.stage]!.toString(), 'VALUE_CONVERTER');
      t.deepEqual(letter!.value, Buffer.from(framed(2, '\u0004a1\u0002'), 'latin1'), 'the dead letter keeps the framed bytes');
      t.is(protoLetter!.headers![CONNECT_HEADERS.offset]!.toString(), '3');
      t.regex(
        protoLetter!.headers![CONNECT_HEADERS.exceptionMessage]!.toString(),
        /Confluent-framed value \(schema id 3\) is not JSON: an Avro or Protobuf value needs a schema registry/,
      );
      t.is(protoLetter!.headers![CONNECT_HEADERS.stage]!.toString(), 'VALUE_CONVERTER');
      t.deepEqual(protoLetter!.value, Buffer.from(framed(3, '\u0000\u0012\u0002p1'), 'latin1'));
    } finally {
      await stack.stop();
    }
  },
);

test.serial('missing transactionId: dlq (default) dead-letters, fail halts visibly, offset stores topic/partition/offset', async (t) => {
  const { kafka, db, sql } = t.context;
  const run = async (policy: KafkaIngressOptions['missingId'], check: (s: IngestStack, topic: string, group: string) => Promise<void>) => {
    const topic = uniqueName(`mid-${policy ?? 'default'}`);
    const group = uniqueName('g-mid');
    await createTopic(kafka, topic, 1);
    await javaProduce(
      brokers(),
      topic,
      [
        { key: 'k', value: '{"n":0}', headers: { transactionId: 'm-0' } },
        { key: 'k', value: '{"n":1}' },
        { key: 'k', value: '{"n":2}', headers: { transactionId: 'm-2' } },
      ],
      { compression: 'none' },
    );
    const stack = await startIngestStack({ databaseUrl: db.url, topic, group, ingress: policy ? { missingId: policy } : {} });
    try {
      await check(stack, topic, group);
    } finally {
      await stack.stop();
    }
  };

  await run(undefined, async (stack, topic, group) => {
    await waitFor('caught up', () => caughtUp(kafka, group, topic), 120_000, 100);
    t.deepEqual(
      (await storedFrames(sql, topic)).map((f) => f.transactionId),
      ['m-0', 'm-2'],
    );
    const [letter] = await readTopic(kafka, `${topic}.dlq`, 1);
    t.regex(letter!.headers![CONNECT_HEADERS.exceptionMessage]!.toString(), /no transactionId.*QUEEN_INGRESS_MISSING_ID=dlq/);
    t.is(stack.ingress.status().halted.length, 0);
  });

  await run('fail', async (stack, topic, group) => {
    await waitFor('a halted partition', () => stack.ingress.status().halted.length === 1, 60_000, 50);
    const status = stack.ingress.status();
    t.false(status.ready);
    t.like(status.halted[0], { topic, partition: 0, offset: '1', cause: 'bad-record' });
    t.regex(status.reasons.join(' '), new RegExp(`partition ${topic}\\[0\\] halted at offset 1 \\(bad-record\\): no transactionId`));
    t.is(halted(await stack.metrics.render()), 1);
    t.true(((await committed(kafka, group, topic)).get(0) ?? -1) < 2, 'nothing committed past it');
    t.false(
      (await storedFrames(sql, topic)).some((f) => f.transactionId === 'm-2'),
      'nothing stored past it',
    );
    t.is(stack.metrics.counter('queen_ingress_dead_letters_total', '').get(), 0);
  });

  await run('offset', async (_stack, topic, group) => {
    await waitFor('caught up', () => caughtUp(kafka, group, topic), 120_000, 100);
    t.deepEqual(
      (await storedFrames(sql, topic)).map((f) => f.transactionId),
      ['m-0', `${topic}/0/1`, 'm-2'],
    );
  });
});

test.serial(
  'a dead-letter write that cannot succeed halts only its partition, visibly from the first failure, across a restart; raising the limit resumes it',
  async (t) => {
    const { kafka, db, sql } = t.context;
    const topic = uniqueName('dlqfail');
    const dlq = `${topic}.dlq`;
    const group = uniqueName('g-dlqfail');
    await createTopic(kafka, topic, 2);
    // Smaller than any dead letter's own context headers: no cut can make one fit, and the broker refuses each write.
    await createDlqTopic(kafka, dlq, 64);
    // One key per partition, placed by the Java client's murmur2 partitioner: the bad record on one, good ones on the other.
    const [badKey, goodKey] = keysOnPartitions(2);
    await javaProduce(
      brokers(),
      topic,
      [
        { key: badKey!, value: '{"n":0}', headers: { transactionId: 'f-0' } },
        { key: badKey!, value: null, headers: { transactionId: 'f-tomb' } },
        { key: badKey!, value: '{"n":2}', headers: { transactionId: 'f-2' } },
        { key: goodKey!, value: '{"n":0}', headers: { transactionId: 'p1-0' } },
        { key: goodKey!, value: '{"n":1}', headers: { transactionId: 'p1-1' } },
      ],
      { compression: 'none' },
    );

    const first = capturingLogger();
    let stack = await startIngestStack({ databaseUrl: db.url, topic, group, logger: first.logger });
    try {
      await withHttp(stack, sql, async (url) => {
        await waitFor('a halted partition', () => stack.ingress.status().halted.length === 1, 60_000, 50);
        const h = stack.ingress.status().halted[0]!;
        t.is(h.cause, 'dead-letter-write');
        t.is(h.topic, topic);
        t.is(h.partition, 0, 'the partition of the bad record');
        const haltLine = first.lines.find((l) => l.msg.startsWith('partition halted: a dead-letter write failed'));
        t.truthy(haltLine, 'logged as an error');
        t.regex(String(haltLine!.reason), /\(1 attempts, retrying with backoff\)/, 'halted at the first failure, not after a timeout');
        const res = await fetch(`${url}/health/ready`);
        t.is(res.status, 503);
        const body = (await res.json()) as { message: string; checks: { kafka: { halted: { partition: number }[] } } };
        t.regex(body.message, new RegExp(`partition ${topic}\\[${h.partition}\\] halted at offset \\d+ \\(dead-letter-write\\)`));
        t.regex(body.message, /MESSAGE_TOO_LARGE|larger than the max message size/i, 'the cause is named');
        t.regex(body.message, /tombstone/, "and the record's own problem");
        t.is(halted(await (await fetch(`${url}/metrics`)).text()), 1);
        // The other partition flows.
        await waitFor('the other partition committed', async () => (await committed(kafka, group, topic)).get(1) === 2, 60_000, 50);
        const stored = (await storedFrames(sql, topic)).map((f) => f.transactionId);
        t.true(stored.includes('p1-0') && stored.includes('p1-1'));
        // Records after it in the same chunk may be stored already (their verdicts came with the push); none is committed.
        t.true(((await committed(kafka, group, topic)).get(0) ?? -1) <= 1, 'nothing committed past the record');
      });
      const haltedPartition = stack.ingress.status().halted[0]!.partition;
      const before = (await committed(kafka, group, topic)).get(haltedPartition) ?? -1;

      // A restart while the write still fails: halted again at once, and visible, not re-stalled silently.
      await stack.stop();
      const second = capturingLogger();
      stack = await startIngestStack({ databaseUrl: db.url, topic, group, logger: second.logger });
      await withHttp(stack, sql, async (url) => {
        await waitFor('halted again after the restart', () => stack.ingress.status().halted.length === 1, 60_000, 50);
        t.like(stack.ingress.status().halted[0], { topic, partition: haltedPartition, cause: 'dead-letter-write' });
        const res = await fetch(`${url}/health/ready`);
        t.is(res.status, 503);
        t.regex(((await res.json()) as { message: string }).message, /halted at offset \d+ \(dead-letter-write\)/);
        t.is(halted(await (await fetch(`${url}/metrics`)).text()), 1);
        t.is((await committed(kafka, group, topic)).get(haltedPartition) ?? -1, before, 'still not committed past it');

        // The operator fixes the cause: the partition resumes by itself.
        await setMaxMessageBytes(kafka, dlq, 1048588);
        await waitFor('resumed and caught up', () => caughtUp(kafka, group, topic), 120_000, 100);
        await waitFor('ready again', async () => (await fetch(`${url}/health/ready`)).status === 200, 60_000, 100);
        t.is(halted(await (await fetch(`${url}/metrics`)).text()), 0);
      });
      const stored = (await storedFrames(sql, topic)).map((f) => f.transactionId).sort();
      t.deepEqual(stored, ['f-0', 'f-2', 'p1-0', 'p1-1'], 'every good record once');
      const [letter] = await readTopic(kafka, dlq, 1);
      t.regex(letter!.headers![CONNECT_HEADERS.exceptionMessage]!.toString(), /tombstone/);
      t.truthy(second.lines.find((l) => l.msg === 'dead-letter write succeeded; partition resumed'));
    } finally {
      await stack.stop();
    }
  },
);

test.serial('errors tolerance "all" for dead-letter writes: the record is skipped, logged and counted; the partition flows', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('dlqskip');
  const dlq = `${topic}.dlq`;
  const group = uniqueName('g-dlqskip');
  await createTopic(kafka, topic, 1);
  await createDlqTopic(kafka, dlq, 64);
  await javaProduce(
    brokers(),
    topic,
    [
      { key: 'a', value: '{"n":0}', headers: { transactionId: 's-0' } },
      { key: 'a', value: null, headers: { transactionId: 's-tomb' } },
      { key: 'a', value: '{"n":2}', headers: { transactionId: 's-2' } },
    ],
    { compression: 'none' },
  );
  const log = capturingLogger();
  const stack = await startIngestStack({
    databaseUrl: db.url,
    topic,
    group,
    logger: log.logger,
    ingress: { deadLetterErrorsTolerance: 'all' },
  });
  try {
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 120_000, 100);
    t.deepEqual(
      (await storedFrames(sql, topic)).map((f) => f.transactionId),
      ['s-0', 's-2'],
    );
    t.is(stack.metrics.counter('queen_ingress_dead_letter_skips_total', '').get(), 1);
    t.is(stack.metrics.counter('queen_ingress_records_total', '').get('skipped'), 1);
    t.is(stack.metrics.counter('queen_ingress_dead_letters_total', '').get(), 0);
    const skip = log.lines.find((l) => l.msg.startsWith('record skipped: its dead-letter write failed'));
    t.truthy(skip);
    t.like(skip, { topic, partition: 0, offset: '1' });
    t.is(stack.ingress.status().halted.length, 0);
    t.is(halted(await stack.metrics.render()), 0);
  } finally {
    await stack.stop();
  }
});

test.serial(
  'per-topic mapping (QUEEN_INGRESS_MAPPING): id from a named header or a JSON pointer, or the key; partition from a field or a constant',
  async (t) => {
    const { kafka, db, sql } = t.context;
    const orders = uniqueName('map-orders');
    const clicks = uniqueName('map-clicks');
    const group = uniqueName('g-map');
    await createTopic(kafka, orders, 1);
    await createTopic(kafka, clicks, 1);
    const mappings = parseMappings(
      JSON.stringify({
        [orders]: { transactionId: ['header:eventId', 'json:/meta/id'], partition: 'json:/customer' },
        [clicks]: { transactionId: 'key', partition: 'constant:all' },
      }),
      [
        { topic: orders, queue: orders },
        { topic: clicks, queue: clicks },
      ],
      'dlq',
    );
    await javaProduce(
      brokers(),
      orders,
      [
        { key: 'k', value: '{"meta":{"id":"ignored"},"customer":"c1"}', headers: { eventId: 'e-1' } },
        { key: 'k', value: '{"meta":{"id":"m-2"},"customer":"c2"}' },
        { key: 'k', value: '{"meta":{"id":"m-2"},"customer":"c2"}' },
        { key: 'k', value: '{"customer":"c3"}', headers: { transactionId: 'not-a-source-here' } },
      ],
      { compression: 'zstd' },
    );
    await javaProduce(
      brokers(),
      clicks,
      [
        { key: 'click-1', value: '{"x":1}' },
        { key: 'click-2', value: '{"x":2}' },
        { key: 'click-1', value: '{"x":1}' },
      ],
      { compression: 'snappy' },
    );
    const stack = await startIngestStack({
      databaseUrl: db.url,
      topic: orders,
      group,
      ingress: { topics: [orders, clicks].map((topic) => ({ topic, queue: topic, mapping: mappings.get(topic)! })) },
    });
    try {
      await waitFor(
        'both topics committed to the end',
        async () => (await caughtUp(kafka, group, orders)) && caughtUp(kafka, group, clicks),
        120_000,
        100,
      );
      t.deepEqual(
        (await storedFrames(sql, orders)).map((f) => [f.partition, f.transactionId]),
        [
          ['c1', 'e-1'],
          ['c2', 'm-2'],
        ],
        'the header wins over the field; the field is the id without it; the re-send is a duplicate',
      );
      t.deepEqual(
        (await storedFrames(sql, clicks)).map((f) => [f.partition, f.transactionId]),
        [
          ['all', 'click-1'],
          ['all', 'click-2'],
        ],
      );
      const [letter] = await readTopic(kafka, `${orders}.dlq`, 1);
      t.regex(letter!.headers![CONNECT_HEADERS.exceptionMessage]!.toString(), /none of header eventId, JSON \/meta\/id gave one/);
      t.is(stack.metrics.counter('queen_ingress_records_total', '').get('duplicate'), 2);
    } finally {
      await stack.stop();
    }
  },
);
