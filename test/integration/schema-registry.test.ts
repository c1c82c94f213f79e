import { SchemaRegistryClient, type Client } from '@confluentinc/schemaregistry';
import type { Kafka, KafkaMessage } from 'kafkajs';
import { parseMappings, redactUrl } from '../../src/config.js';
import { CONNECT_HEADERS } from '../../src/ingress/deadLetter.js';
import { SchemaRegistryDecoder } from '../../src/ingress/schemaRegistry.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { FakeSchemaRegistry } from '../helpers/fakeSchemaRegistry.js';
import { brokers, caughtUp, committed, createTopic, produce, recordCount, storedFrames, uniqueName } from '../helpers/kafka.js';
import { waitFor } from '../helpers/leaks.js';
import { javaProduce } from '../helpers/javaProducer.js';
import { framers } from '../helpers/registryFixtures.js';
import { ServiceProcess } from '../helpers/serviceProcess.js';
import { startIngestStack } from '../helpers/stack.js';
import { kafkaDbTest } from '../helpers/kafkaDbTest.js';

/**
 * Confluent-framed Avro, Protobuf and JSON Schema values, made by Confluent's
 * own serializers and written to a real Kafka topic by a kafkajs producer (a
 * binary-exact one: Kafka's console producer cannot send arbitrary bytes),
 * ingested by the real service against a Schema Registry.
 *
 * Which registry: QUEEN_TEST_SCHEMA_REGISTRY_URL names a real one (`make
 * test-registry`; optional QUEEN_TEST_SCHEMA_REGISTRY_USER/_PASSWORD).
 * Without it the registry is FakeSchemaRegistry, an in-process stand-in for
 * the few REST calls the client makes, and the tests say so in their titles:
 * no real registry can run where this project is developed. The test of an
 * unreachable registry always uses the stand-in (it must be able to fail it).
 */

const REAL_URL = process.env.QUEEN_TEST_SCHEMA_REGISTRY_URL;
const REAL_AUTH =
  process.env.QUEEN_TEST_SCHEMA_REGISTRY_USER && process.env.QUEEN_TEST_SCHEMA_REGISTRY_PASSWORD
    ? { user: process.env.QUEEN_TEST_SCHEMA_REGISTRY_USER, password: process.env.QUEEN_TEST_SCHEMA_REGISTRY_PASSWORD }
    : undefined;
const AGAINST = REAL_URL
  ? `against the real Schema Registry at ${redactUrl(REAL_URL)}`
  : 'against an in-process stand-in for the registry REST API (no real registry here)';
/** An id no registry in a test has handed out. */
const UNKNOWN_ID = 2_147_480_000;

const test = kafkaDbTest('schema_registry');

function producerClient(url: string, auth?: { user: string; password: string }): Client {
  return new SchemaRegistryClient({
    baseURLs: [url],
    ...(auth ? { basicAuthCredentials: { credentialsSource: 'USER_INFO', userInfo: `${auth.user}:${auth.password}` } } : {}),
  });
}

/** A framed value naming a schema id the registry does not have. */
function unknownIdValue(): Buffer {
  const b = Buffer.concat([Buffer.alloc(5), Buffer.from('{"transactionId":"never"}')]);
  b.writeUInt32BE(UNKNOWN_ID, 1);
  return b;
}

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

test.serial(
  `Avro, Protobuf and JSON Schema values through the service ${AGAINST}: dedup by a decoded field, an unknown schema id dead-lettered with its reason`,
  async (t) => {
    const { kafka, db, sql } = t.context;
    const password = 'reg-s3cret-pw';
    const fake = REAL_URL ? undefined : await FakeSchemaRegistry.start({ auth: { user: 'queen', password } });
    t.teardown(() => fake?.stop());
    const url = REAL_URL ?? fake!.url;
    const auth = REAL_URL ? REAL_AUTH : { user: 'queen', password };
    const f = framers(producerClient(url, auth));
    const avroTopic = uniqueName('sr-avro');
    const protoTopic = uniqueName('sr-proto');
    const jsonTopic = uniqueName('sr-json');
    const order = (id: string) => ({ orderId: id, customer: 'c-1', cents: 990, note: null, tag: Buffer.from([0xff, 0x00]) });
    const values = {
      [avroTopic]: [await f.avro(avroTopic, order('a-1')), await f.avro(avroTopic, order('a-1')), await f.avro(avroTopic, order('a-2'))],
      [protoTopic]: [
        await f.protobuf(protoTopic, 'Order', { seq: 1n, orderId: 'p-1', customer: 'c-2' }),
        await f.protobuf(protoTopic, 'Order', { seq: 1n, orderId: 'p-1', customer: 'c-2' }),
        await f.protobuf(protoTopic, 'Order', { seq: 2n, orderId: 'p-2', customer: 'c-2' }),
      ],
      [jsonTopic]: [
        await f.json(jsonTopic, { transactionId: 'j-1', n: 1 }),
        await f.json(jsonTopic, { transactionId: 'j-1', n: 1 }),
        await f.json(jsonTopic, { transactionId: 'j-2', n: 2 }),
      ],
    };
    for (const [topic, vs] of Object.entries(values)) {
      await createTopic(kafka, topic, 1);
      // The re-send (index 1) is the producer's retry as a new record; the unknown id comes last.
      await produce(kafka, topic, [...vs.map((value) => ({ key: 'k', value })), { key: 'k', value: unknownIdValue() }]);
    }
    const group = uniqueName('g-sr');
    const proc = new ServiceProcess({
      DATABASE_URL: db.url,
      KAFKA_BROKERS: brokers().join(','),
      QUEEN_WORKERS: '1',
      QUEEN_PG_POOL_SIZE: '6',
      QUEEN_KAFKA_SESSION_TIMEOUT_MS: '6000',
      QUEEN_INGRESS_GROUP: group,
      QUEEN_INGRESS_TOPICS: [avroTopic, protoTopic, jsonTopic].join(','),
      QUEEN_INGRESS_MAPPING: JSON.stringify({
        [avroTopic]: { transactionId: 'json:/orderId', partition: 'json:/customer' },
        [protoTopic]: { transactionId: 'json:/order_id', partition: 'json:/customer' },
      }),
      QUEEN_SCHEMA_REGISTRY_URL: url,
      ...(auth ? { QUEEN_SCHEMA_REGISTRY_USER: auth.user, QUEEN_SCHEMA_REGISTRY_PASSWORD: auth.password } : {}),
    });
    t.teardown(() => proc.ensureDead());
    await proc.ready();
    for (const topic of Object.keys(values))
      await waitFor(`the group to commit the end of ${topic}`, () => caughtUp(kafka, group, topic), 120_000, 100);

    const stored = async (topic: string) =>
      (await storedFrames(sql, topic)).map((fr) => [fr.partition, fr.transactionId, JSON.parse(fr.payload.toString())]);
    t.deepEqual(await stored(avroTopic), [
      ['c-1', 'a-1', { orderId: 'a-1', customer: 'c-1', cents: 990, note: null, tag: '/wA=' }],
      ['c-1', 'a-2', { orderId: 'a-2', customer: 'c-1', cents: 990, note: null, tag: '/wA=' }],
    ]);
    t.deepEqual(await stored(protoTopic), [
      ['c-2', 'p-1', { seq: '1', order_id: 'p-1', customer: 'c-2' }],
      ['c-2', 'p-2', { seq: '2', order_id: 'p-2', customer: 'c-2' }],
    ]);
    t.deepEqual(await stored(jsonTopic), [
      ['k', 'j-1', { transactionId: 'j-1', n: 1 }],
      ['k', 'j-2', { transactionId: 'j-2', n: 2 }],
    ]);
    for (const topic of Object.keys(values)) {
      const [letter] = await readTopic(kafka, `${topic}.dlq`, 1);
      t.is(letter!.headers![CONNECT_HEADERS.offset]!.toString(), '3', `${topic}: the unknown id's record`);
      t.regex(
        letter!.headers![CONNECT_HEADERS.exceptionMessage]!.toString(),
        new RegExp(`schema id ${UNKNOWN_ID} is not in the schema registry`),
      );
      t.is(letter!.headers![CONNECT_HEADERS.stage]!.toString(), 'VALUE_CONVERTER');
      t.deepEqual(letter!.value, unknownIdValue(), 'the dead letter keeps the framed bytes');
      t.is(await recordCount(kafka, `${topic}.dlq`), 1, 'only the unknown id is dead-lettered');
    }
    if (fake) {
      // The service asks once per schema id, with the credentials: a Protobuf id twice (its text, then its descriptor), the unknown id once for all three topics.
      const asked = (id: number) => fake.count(`GET /schemas/ids/${id}`);
      t.is(asked(values[avroTopic]![0]!.readUInt32BE(1)), 1);
      t.is(asked(values[jsonTopic]![0]!.readUInt32BE(1)), 1);
      t.is(asked(values[protoTopic]![0]!.readUInt32BE(1)), 2);
      t.is(asked(UNKNOWN_ID), 1);
      t.true(fake.authorizations.every((a) => a === `Basic ${Buffer.from(`queen:${password}`).toString('base64')}`));
    }
    t.false(JSON.stringify(proc.lines).includes(password), 'the registry password is never logged');
  },
);

test.serial(
  'a registry that fails halts the partition visibly (readiness names it), nothing is dead-lettered or committed, and the records land once it answers (in-process stand-in)',
  async (t) => {
    const { kafka, db, sql } = t.context;
    const fake = await FakeSchemaRegistry.start();
    t.teardown(() => fake.stop());
    const topic = uniqueName('sr-down');
    const group = uniqueName('g-sr-down');
    const f = framers(producerClient(fake.url));
    const order = (id: string) => ({ orderId: id, customer: 'c', cents: 1, note: null, tag: Buffer.alloc(0) });
    await createTopic(kafka, topic, 1);
    const values = [await f.avro(topic, order('d-1')), await f.avro(topic, order('d-1')), await f.avro(topic, order('d-2'))];
    await produce(
      kafka,
      topic,
      values.map((value) => ({ key: 'k', value })),
    );
    fake.down(true);
    const stack = await startIngestStack({
      databaseUrl: db.url,
      topic,
      group,
      ingress: {
        topics: [
          { topic, queue: topic, mapping: { transactionId: [{ jsonPointer: '/orderId' }], partition: { key: true }, missingId: 'dlq' } },
        ],
        schemaRegistry: SchemaRegistryDecoder.fromConfig(
          { urls: [fake.url], basicAuth: undefined, ca: undefined, timeoutMs: 2_000 },
          silentLogger,
        ),
      },
    });
    try {
      const status = await waitFor(
        'the partition to halt on the registry',
        () => {
          const s = stack.ingress.status();
          return s.halted.length > 0 ? s : undefined;
        },
        60_000,
        50,
      );
      t.like(status.halted[0], { topic, partition: 0, offset: '0', cause: 'schema-registry' });
      t.false(status.ready);
      t.regex(
        status.reasons.join(' '),
        new RegExp(`partition ${topic}\\[0\\] halted at offset 0 \\(schema-registry\\): schema registry failing since .*HTTP 503`),
      );
      t.deepEqual(await storedFrames(sql, topic), [], 'nothing stored');
      t.is((await committed(kafka, group, topic)).get(0) ?? -1, -1, 'nothing committed');
      fake.down(false);
      await waitFor('the group to commit the end of the topic', () => caughtUp(kafka, group, topic), 120_000, 100);
      t.deepEqual(
        (await storedFrames(sql, topic)).map((fr) => fr.transactionId),
        ['d-1', 'd-2'],
      );
      t.is(stack.metrics.counter('queen_ingress_records_total', '').get('duplicate'), 1, 'the re-send is a duplicate');
      t.is(stack.metrics.counter('queen_ingress_records_total', '').get('dead_lettered'), 0, 'an unreachable registry never dead-letters');
      t.deepEqual(stack.ingress.status().halted, [], 'resumed by itself');
    } finally {
      await stack.stop();
    }
  },
);

/**
 * Bytes as Kafka's console producer can send them: it reads lines as UTF-8
 * and writes each value back as UTF-8, so a value must be valid UTF-8 without
 * a tab, CR or newline. The stand-in hands out ids 1, 2, 3 and the values
 * below keep every byte under 0x80, which a real registry's ids need not.
 */
function consoleSafe(b: Buffer): string | undefined {
  const text = b.toString('utf8');
  return Buffer.from(text).equals(b) && !/[\t\r\n]/.test(text) ? text : undefined;
}

test.serial(
  "framed Avro, Protobuf and JSON Schema values from Kafka's Java producer, decoded through the in-process stand-in: dedup by a decoded field",
  async (t) => {
    const { kafka, db, sql } = t.context;
    const fake = await FakeSchemaRegistry.start();
    t.teardown(() => fake.stop());
    const f = framers(producerClient(fake.url));
    const topics = { avro: uniqueName('sr-java-avro'), proto: uniqueName('sr-java-proto'), json: uniqueName('sr-java-json') };
    const order = (id: string) => ({ orderId: id, customer: 'c-1', cents: 7, note: null, tag: Buffer.from('x') });
    const values: Record<string, Buffer[]> = {
      [topics.avro]: [await f.avro(topics.avro, order('a-1')), await f.avro(topics.avro, order('a-2'))],
      [topics.proto]: [
        await f.protobuf(topics.proto, 'Order', { seq: 1n, orderId: 'p-1', customer: 'c-2' }),
        await f.protobuf(topics.proto, 'Order', { seq: 2n, orderId: 'p-2', customer: 'c-2' }),
      ],
      [topics.json]: [await f.json(topics.json, { transactionId: 'j-1', n: 1 }), await f.json(topics.json, { transactionId: 'j-2', n: 2 })],
    };
    for (const [topic, [first, second]] of Object.entries(values)) {
      const [a, b] = [consoleSafe(first!), consoleSafe(second!)];
      if (a === undefined || b === undefined) return t.fail(`${topic}: the serialized bytes cannot go through the console producer`);
      await createTopic(kafka, topic, 1);
      // The first event, its re-send by the producer as a new record, the second event.
      await javaProduce(
        brokers(),
        topic,
        [a, a, b].map((value) => ({ key: 'k', value })),
        { compression: 'lz4' },
      );
    }
    const group = uniqueName('g-sr-java');
    const mappings = parseMappings(
      JSON.stringify({ [topics.avro]: { transactionId: 'json:/orderId' }, [topics.proto]: { transactionId: 'json:/order_id' } }),
      Object.keys(values).map((topic) => ({ topic, queue: topic })),
      'dlq',
    );
    const stack = await startIngestStack({
      databaseUrl: db.url,
      topic: topics.avro,
      group,
      ingress: {
        topics: Object.keys(values).map((topic) => ({
          topic,
          queue: topic,
          ...(mappings.has(topic) ? { mapping: mappings.get(topic)! } : {}),
        })),
        schemaRegistry: SchemaRegistryDecoder.fromConfig(
          { urls: [fake.url], basicAuth: undefined, ca: undefined, timeoutMs: 2_000 },
          silentLogger,
        ),
      },
    });
    try {
      for (const topic of Object.keys(values))
        await waitFor(`the group to commit the end of ${topic}`, () => caughtUp(kafka, group, topic), 120_000, 100);
      const ids = async (topic: string) => (await storedFrames(sql, topic)).map((fr) => fr.transactionId);
      t.deepEqual(await ids(topics.avro), ['a-1', 'a-2']);
      t.deepEqual(await ids(topics.proto), ['p-1', 'p-2']);
      t.deepEqual(await ids(topics.json), ['j-1', 'j-2']);
      t.deepEqual(JSON.parse((await storedFrames(sql, topics.avro))[0]!.payload.toString()), {
        orderId: 'a-1',
        customer: 'c-1',
        cents: 7,
        note: null,
        tag: 'eA==',
      });
      const rec = stack.metrics.counter('queen_ingress_records_total', '');
      t.is(rec.get('duplicate'), 3, "each topic's re-send is a duplicate");
      t.is(rec.get('dead_lettered'), 0);
    } finally {
      await stack.stop();
    }
  },
);
