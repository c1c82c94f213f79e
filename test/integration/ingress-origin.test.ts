import kafkajs from 'kafkajs';
import { HttpApi } from '../../src/http/server.js';
import { ReadPath } from '../../src/read/readPath.js';
import { headerBytes, type KafkaOrigin } from '../../src/client/types.js';
import { javaProduce } from '../helpers/javaProducer.js';
import { brokers, caughtUp, createTopic, storedFrames, uniqueName } from '../helpers/kafka.js';
import { waitFor } from '../helpers/leaks.js';
import { startIngestStack, type IngestStack } from '../helpers/stack.js';
import { kafkaDbTest } from '../helpers/kafkaDbTest.js';

const { Partitioners } = kafkajs;

/**
 * A Kafka record's headers and timestamp are kept with its message (frame
 * format v2) and returned by pop and browse, as real producers send them:
 * Kafka's own Java producer with a null header value, kafkajs with binary
 * values and a repeated key. The dedup key is the transactionId alone, so a
 * re-send with other headers is a duplicate and keeps the first headers.
 */

const test = kafkaDbTest('ingress_origin');

interface WireMessage {
  transactionId: string;
  offset: number;
  data: unknown;
  kafka?: KafkaOrigin;
}

/** The ingress stack with the read path and HTTP API over it. */
async function withApi<T>(stack: IngestStack, dbUrl: string, fn: (url: string) => Promise<T>): Promise<T> {
  const read = new ReadPath(stack.engine, stack.writer, { connectionString: dbUrl, metrics: stack.metrics });
  const http = new HttpApi({
    fusion: stack.fusion,
    read,
    pool: stack.engine.pool,
    metrics: stack.metrics,
    maxBodyBytes: 1 << 20,
    host: '127.0.0.1',
    port: 0,
  });
  await read.start();
  await http.start();
  try {
    return await fn(http.url);
  } finally {
    await http.stop();
    await read.stop();
  }
}

async function getJson<T>(url: string): Promise<T> {
  const r = await fetch(url);
  if (r.status !== 200) throw new Error(`GET ${url}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

test.serial('headers and timestamp are kept and returned by browse and pop; a re-send with other headers is a duplicate', async (t) => {
  const { kafka, db, sql } = t.context;
  const topic = uniqueName('origin');
  const group = uniqueName('g-origin');
  await createTopic(kafka, topic, 1);
  const before = Date.now();
  // Kafka's own Java producer: a null header value, and a record with no headers beyond its id.
  await javaProduce(
    brokers(),
    topic,
    [
      { key: 'k', value: '{"n":0}', headers: { transactionId: 'o-0', traceparent: null, tenant: 'acme' } },
      { key: 'k', value: '{"n":1}', headers: { transactionId: 'o-1' } },
    ],
    { compression: 'lz4' },
  );
  // kafkajs: a binary value, a repeated key, an explicit timestamp; then a re-send of o-0 with other headers.
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    await producer.send({
      topic,
      messages: [
        {
          key: 'k',
          value: '{"n":2}',
          timestamp: '1764870000123',
          headers: { transactionId: 'o-2', bin: Buffer.from([0xff, 0x00, 0x80]), rep: ['a', 'b'] },
        },
        { key: 'k', value: '{"n":0,"again":true}', headers: { transactionId: 'o-0', tenant: 'other', extra: 'x' } },
      ],
    });
  } finally {
    await producer.disconnect();
  }
  const after = Date.now();
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group });
  try {
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 120_000, 100);
    t.deepEqual(
      (await storedFrames(sql, topic)).map((f) => f.transactionId),
      ['o-0', 'o-1', 'o-2'],
      'the re-send with other headers was a duplicate',
    );
    const bySql = await sql.query(
      `SELECT r.msg_offset, r.transaction_id, convert_from(r.payload, 'UTF8') AS payload
       FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
       CROSS JOIN LATERAL queen.log_read_v1(lp.id, 0, 10) r WHERE q.name = $1 ORDER BY 1`,
      [topic],
    );
    t.deepEqual(
      bySql.rows.map((r: { transaction_id: string; payload: string }) => [r.transaction_id, JSON.parse(r.payload)]),
      [
        ['o-0', { n: 0 }],
        ['o-1', { n: 1 }],
        ['o-2', { n: 2 }],
      ],
      'log_read_v1 walks the v2 frames',
    );
    await withApi(stack, db.url, async (url) => {
      const page = await getJson<{ messages: WireMessage[] }>(`${url}/api/v1/messages?queue=${topic}&partition=k`);
      const [m0, m1, m2] = page.messages;
      t.is(page.messages.length, 3);
      t.deepEqual(m0!.data, { n: 0 }, 'the first payload stays');
      const o0 = m0!.kafka!;
      t.is(o0.topic, topic);
      t.is(o0.partition, 0);
      t.is(o0.offset, '0');
      const ts = Date.parse(o0.timestamp!);
      t.true(ts >= before - 1000 && ts <= after + 1000, `the producer's timestamp ${o0.timestamp} is kept`);
      t.deepEqual(
        o0.headers,
        [
          { key: 'transactionId', value: 'o-0' },
          { key: 'traceparent', value: null },
          { key: 'tenant', value: 'acme' },
        ],
        'the Java producer headers in order, the null value as null, the first send kept',
      );
      t.is(m1!.kafka!.offset, '1');
      t.deepEqual(m1!.kafka!.headers, [{ key: 'transactionId', value: 'o-1' }]);
      const o2 = m2!.kafka!;
      t.is(o2.offset, '2');
      t.is(o2.timestamp, new Date(1764870000123).toISOString());
      t.deepEqual(o2.headers, [
        { key: 'transactionId', value: 'o-2' },
        { key: 'bin', value: Buffer.from([0xff, 0x00, 0x80]).toString('base64'), valueEncoding: 'base64' },
        { key: 'rep', value: 'a' },
        { key: 'rep', value: 'b' },
      ]);
      t.deepEqual(Buffer.from(headerBytes(o2.headers[1]!)!), Buffer.from([0xff, 0x00, 0x80]), 'the client gives the bytes back');
      t.deepEqual(Buffer.from(headerBytes(o2.headers[2]!)!), Buffer.from('a'));
      t.is(headerBytes(o0.headers[1]!), null);
      const one = await getJson<{ kafka?: KafkaOrigin }>(`${url}/api/v1/messages/${await partitionId(url, topic)}/o-2`);
      t.deepEqual(one.kafka, o2, 'by transactionId too');

      const popped = await getJson<{ leaseId: string; messages: WireMessage[] }>(
        `${url}/api/v1/pop/queue/${topic}?consumerGroup=g1&batch=10`,
      );
      t.deepEqual(
        popped.messages.map((m) => m.kafka),
        page.messages.map((m) => m.kafka),
        'pop returns the same origin as browse',
      );
      // A v2 segment's frames are read by SQL too: the dead-letter copy (log_read_v1) skips the origin sections.
      const ack = await fetch(`${url}/api/v1/ack`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ transactionId: 'o-1', leaseId: popped.leaseId, consumerGroup: 'g1', status: 'dlq', error: 'test' }),
      });
      t.is(ack.status, 200);
      const dlq = await getJson<{ deadLetters: { transactionId: string; data: unknown }[] }>(`${url}/api/v1/dlq?queue=${topic}`);
      t.deepEqual(
        dlq.deadLetters.map((d) => [d.transactionId, d.data]),
        [['o-1', { n: 1 }]],
      );
    });
  } finally {
    await stack.stop();
  }
});

test.serial('keepOrigin off (QUEEN_INGRESS_KEEP_ORIGIN=false): messages carry no kafka field', async (t) => {
  const { kafka, db } = t.context;
  const topic = uniqueName('noorigin');
  const group = uniqueName('g-noorigin');
  await createTopic(kafka, topic, 1);
  await javaProduce(brokers(), topic, [{ key: 'k', value: '{"n":0}', headers: { transactionId: 'p-0', tenant: 'acme' } }], {
    compression: 'none',
  });
  const stack = await startIngestStack({ databaseUrl: db.url, topic, group, ingress: { keepOrigin: false } });
  try {
    await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 120_000, 100);
    await withApi(stack, db.url, async (url) => {
      const page = await getJson<{ messages: (WireMessage & Record<string, unknown>)[] }>(
        `${url}/api/v1/messages?queue=${topic}&partition=k`,
      );
      t.is(page.messages.length, 1);
      t.is(page.messages[0]!.transactionId, 'p-0');
      t.false('kafka' in page.messages[0]!);
    });
  } finally {
    await stack.stop();
  }
});

async function partitionId(url: string, queue: string): Promise<number> {
  const page = await getJson<{ partitionId: number }>(`${url}/api/v1/messages?queue=${queue}&partition=k&limit=1`);
  return page.partitionId;
}
