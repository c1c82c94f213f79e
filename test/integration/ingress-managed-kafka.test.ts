import { Writable } from 'node:stream';
import anyTest, { type TestFn } from 'ava';
import pg from 'pg';
import { pino } from 'pino';
import { loadConfig } from '../../src/config.js';
import { LagMonitor } from '../../src/ingress/lagMonitor.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { caughtUp, createTopic, produce, storedFrames, uniqueName } from '../helpers/kafka.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';
import { SecureKafka } from '../helpers/secureKafka.js';
import { startIngestStack } from '../helpers/stack.js';

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  broker: SecureKafka;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('managed_kafka');
  const broker = new SecureKafka();
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 2 }), broker };
  await broker.start();
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.broker?.stop();
  await t.context.sql?.end();
  await t.context.db?.drop();
});

/** The service's own configuration path: environment -> src/config.ts -> ingress options. */
function ingressFromEnv(env: Record<string, string>) {
  const c = loadConfig({ ...env, QUEEN_INGRESS_TOPICS: 'x' });
  return { brokers: c.kafkaBrokers, clientId: c.kafkaClientId, ssl: c.kafkaTls, sasl: c.kafkaSasl };
}

const cases: { name: string; env: (b: SecureKafka) => Record<string, string> }[] = [
  {
    name: 'SASL SCRAM-SHA-256',
    env: (b) => ({
      KAFKA_BROKERS: b.saslBroker,
      KAFKA_SASL_MECHANISM: 'scram-sha-256',
      KAFKA_SASL_USERNAME: b.user,
      KAFKA_SASL_PASSWORD: b.password,
    }),
  },
  {
    name: 'SASL SCRAM-SHA-512',
    env: (b) => ({
      KAFKA_BROKERS: b.saslBroker,
      KAFKA_SASL_MECHANISM: 'scram-sha-512',
      KAFKA_SASL_USERNAME: b.user,
      KAFKA_SASL_PASSWORD: b.password,
    }),
  },
  {
    name: 'SASL PLAIN',
    env: (b) => ({
      KAFKA_BROKERS: b.saslBroker,
      KAFKA_SASL_MECHANISM: 'plain',
      KAFKA_SASL_USERNAME: b.user,
      KAFKA_SASL_PASSWORD: b.password,
      KAFKA_CLIENT_ID: 'plain-client',
    }),
  },
  {
    name: 'TLS (broker certificate verified against KAFKA_SSL_CA_FILE)',
    env: (b) => ({ KAFKA_BROKERS: b.sslBroker, KAFKA_SSL_CA_FILE: b.caFile }),
  },
];

for (const c of cases) {
  test.serial(`managed Kafka over ${c.name}: records are ingested exactly once`, async (t) => {
    const { broker, db, sql } = t.context;
    const opts = ingressFromEnv(c.env(broker));
    const kafka = broker.client({ sasl: opts.sasl, ssl: opts.ssl });
    const topic = uniqueName('secure');
    const group = uniqueName('g-secure');
    await createTopic(kafka, topic, 2);
    await produce(
      kafka,
      topic,
      Array.from({ length: 200 }, (_, i) => ({ key: `k${i % 4}`, value: `{"i":${i}}`, headers: { transactionId: `s-${i}` } })),
    );
    // The lag reader connects with the same settings (it has its own admin client).
    const lag = new LagMonitor({ ...opts, groupId: group, topics: [topic], intervalMs: 100 }, silentLogger, new MetricsRegistry());
    await lag.start();
    try {
      await waitFor('lag of the 200 unread records', () => lag.total() === 200n, 60_000, 50);
      const stack = await startIngestStack({ databaseUrl: db.url, topic, group, ingress: opts });
      try {
        await waitFor('caught up', () => caughtUp(kafka, group, topic), 120_000, 100);
        const frames = await storedFrames(sql, topic);
        t.is(frames.length, 200);
        t.is(new Set(frames.map((f) => f.transactionId)).size, 200);
        await waitFor('lag read back to zero over the secure listener', () => lag.total() === 0n, 60_000, 50);
      } finally {
        await stack.stop();
      }
    } finally {
      await lag.stop();
    }
  });
}

test.serial('a wrong SASL password fails start-up with an authentication error, and no log line carries the password', async (t) => {
  const { broker, db } = t.context;
  const wrong = `wrong-${broker.password}`;
  const lines: string[] = [];
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write: (chunk, _enc, done) => {
        lines.push(chunk.toString());
        done();
      },
    }),
  );
  const opts = ingressFromEnv({
    KAFKA_BROKERS: broker.saslBroker,
    KAFKA_SASL_MECHANISM: 'scram-sha-512',
    KAFKA_SASL_USERNAME: broker.user,
    KAFKA_SASL_PASSWORD: wrong,
  });
  const err = await t.throwsAsync(
    startIngestStack({ databaseUrl: db.url, topic: uniqueName('denied'), group: uniqueName('g-denied'), ingress: opts, logger }),
  );
  t.regex(err.message, /SASL|authentic/i);
  t.false(err.message.includes(wrong));
  t.false(
    lines.some((l) => l.includes(wrong) || l.includes(broker.password)),
    'the password never reaches the log',
  );
});
