import test from 'ava';
import { loadConfig, parseConsumerSettings } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

test('QUEEN_KAFKA_CONSUMER: kafkajs consumer options pass through, typed', (t) => {
  const c = loadConfig({
    KAFKA_BROKERS: 'h:1',
    QUEEN_INGRESS_TOPICS: 'orders',
    QUEEN_KAFKA_CONSUMER: JSON.stringify({
      sessionTimeout: 45_000,
      heartbeatInterval: 5_000,
      rebalanceTimeout: 90_000,
      metadataMaxAge: 60_000,
      maxBytesPerPartition: 2 * 1024 * 1024,
      minBytes: 1024,
      maxBytes: 16 * 1024 * 1024,
      maxWaitTimeInMs: 100,
      readUncommitted: false,
      maxInFlightRequests: 5,
      rackId: 'eu-1a',
      autoCommit: false,
      eachBatchAutoResolve: false,
    }),
  });
  // sessionTimeout goes where QUEEN_KAFKA_SESSION_TIMEOUT_MS would put it: one value, one place.
  t.is(c.kafkaSessionTimeoutMs, 45_000);
  t.deepEqual(c.kafkaConsumer, {
    heartbeatInterval: 5_000,
    rebalanceTimeout: 90_000,
    metadataMaxAge: 60_000,
    maxBytesPerPartition: 2 * 1024 * 1024,
    minBytes: 1024,
    maxBytes: 16 * 1024 * 1024,
    maxWaitTimeInMs: 100,
    readUncommitted: false,
    maxInFlightRequests: 5,
    rackId: 'eu-1a',
  });
  t.deepEqual(loadConfig({}).kafkaConsumer, {});
  t.is(loadConfig({}).kafkaSessionTimeoutMs, 30_000);
});

test('QUEEN_KAFKA_CONSUMER: unknown options, wrong types and broken invariants fail with the option and the reason', (t) => {
  const bad: [object | string, RegExp][] = [
    ['not json', /QUEEN_KAFKA_CONSUMER must be a JSON object of kafkajs consumer options/],
    [[], /must be a JSON object/],
    [{ sessionTimeOut: 1 }, /QUEEN_KAFKA_CONSUMER\.sessionTimeOut: unknown option \(allowed: sessionTimeout, heartbeatInterval/],
    [{ sessionTimeout: '30000' }, /sessionTimeout must be an integer between 6000 and 300000, got "30000"/],
    [{ sessionTimeout: 1000 }, /sessionTimeout must be an integer between 6000 and 300000, got 1000/],
    [{ maxBytes: 1.5 }, /maxBytes must be an integer/],
    [{ readUncommitted: 'yes' }, /readUncommitted must be true or false/],
    [{ rackId: '' }, /rackId must be a non-empty string/],
    [{ autoCommit: true }, /autoCommit must stay false: offsets are committed only behind verdicts/],
    [{ eachBatchAutoResolve: true }, /eachBatchAutoResolve must stay false/],
    [{ autoCommitInterval: 5000 }, /autoCommitInterval cannot be set here: offsets are committed only behind verdicts/],
    [{ retry: { retries: 3 } }, /retry cannot be set here: the ingress's supervisor owns restarts/],
    [{ groupId: 'g' }, /groupId cannot be set here: set QUEEN_INGRESS_GROUP/],
    [{ partitionsConsumedConcurrently: 4 }, /set QUEEN_INGRESS_CONCURRENCY/],
    [{ fromBeginning: false }, /set QUEEN_INGRESS_FROM_BEGINNING/],
    [{ allowAutoTopicCreation: false }, /allowAutoTopicCreation cannot be set here/],
    [{ heartbeatInterval: 30_000 }, /heartbeatInterval \(30000\) must be below the session timeout \(30000\)/],
    [{ sessionTimeout: 10_000, heartbeatInterval: 12_000 }, /heartbeatInterval \(12000\) must be below the session timeout \(10000\)/],
    [{ rebalanceTimeout: 20_000 }, /rebalanceTimeout \(20000\) must be at least the session timeout \(30000\)/],
    [{ maxWaitTimeInMs: 40_000, sessionTimeout: 40_000 }, /maxWaitTimeInMs \(40000\) must be below the session timeout \(40000\)/],
    [{ maxBytesPerPartition: 20 * 1024 * 1024 }, /maxBytesPerPartition \(20971520\) must be at most maxBytes \(10485760/],
    [{ minBytes: 4096, maxBytes: 2048 }, /minBytes \(4096\) must be at most maxBytes \(2048\)/],
  ];
  for (const [value, re] of bad) {
    const raw = typeof value === 'string' ? value : JSON.stringify(value);
    const err = t.throws(() => parseConsumerSettings(raw, 30_000), { instanceOf: ConfigError }, raw);
    t.regex(err.message, re, raw);
  }
});

test('QUEEN_KAFKA_CONSUMER.sessionTimeout and QUEEN_KAFKA_SESSION_TIMEOUT_MS must agree; the env one bounds the others', (t) => {
  const err = t.throws(() => loadConfig({ QUEEN_KAFKA_SESSION_TIMEOUT_MS: '20000', QUEEN_KAFKA_CONSUMER: '{"sessionTimeout":45000}' }), {
    instanceOf: ConfigError,
  });
  t.regex(err.message, /contradicts QUEEN_KAFKA_SESSION_TIMEOUT_MS \(20000\): set one of them/);
  t.is(
    loadConfig({ QUEEN_KAFKA_SESSION_TIMEOUT_MS: '45000', QUEEN_KAFKA_CONSUMER: '{"sessionTimeout":45000}' }).kafkaSessionTimeoutMs,
    45_000,
  );
  const short = t.throws(
    () => loadConfig({ QUEEN_KAFKA_SESSION_TIMEOUT_MS: '10000', QUEEN_KAFKA_CONSUMER: '{"heartbeatInterval":10000}' }),
    { instanceOf: ConfigError },
  );
  t.regex(short.message, /heartbeatInterval \(10000\) must be below the session timeout \(10000\)/);
});
