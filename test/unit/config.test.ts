import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { loadConfig, parseMappings, parseTopics, redactUrl } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

test('defaults: dedup cache on, 512 MB, port 6632, no topics', (t) => {
  const c = loadConfig({});
  t.is(c.httpPort, 6632);
  t.true(c.dedupCacheEnabled);
  t.is(c.dedupCacheMb, 512);
  t.is(c.dedupPrewarmPartitions, 4096, 'the cache is warmed at start');
  t.is(loadConfig({ QUEEN_DEDUP_PREWARM_PARTITIONS: '0' }).dedupPrewarmPartitions, 0, '0: no prewarm');
  t.is(c.dedupLookup, 'adaptive', "a filter's maybe items are looked up where their partition's lookups say");
  t.is(loadConfig({ QUEEN_DEDUP_LOOKUP: 'apart' }).dedupLookup, 'apart');
  t.deepEqual(c.ingressTopics, []);
  t.is(c.maxPayloadBytes, 1024 * 1024);
  t.is(c.ingressTopicRefreshMs, 300_000, 'patterns are matched again every 5 minutes, as a Java consumer sees new topics');
  t.is(loadConfig({ QUEEN_INGRESS_TOPIC_REFRESH_MS: '0' }).ingressTopicRefreshMs, 0, '0: only at start');
});

test('managed Kafka: SASL and TLS settings, per-topic dead-letter topic, errors tolerance', (t) => {
  const c = loadConfig({
    KAFKA_SASL_MECHANISM: 'scram-sha-512',
    KAFKA_SASL_USERNAME: 'svc',
    KAFKA_SASL_PASSWORD: 's3cret',
    KAFKA_SSL: 'true',
    KAFKA_CLIENT_ID: 'ingest-1',
    QUEEN_INGRESS_ERRORS_TOLERANCE: 'none',
    QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE: 'all',
    QUEEN_INGRESS_MISSING_ID: 'offset',
    QUEEN_INGRESS_TOPICS: 'orders:o:orders-errors,pay',
    KAFKA_BROKERS: 'h:1',
  });
  t.deepEqual(c.kafkaSasl, { mechanism: 'scram-sha-512', username: 'svc', password: 's3cret' });
  t.deepEqual(c.kafkaTls, { rejectUnauthorized: true });
  t.is(c.kafkaClientId, 'ingest-1');
  t.is(c.ingressErrorsTolerance, 'none');
  t.is(c.ingressDlqErrorsTolerance, 'all');
  t.is(c.ingressMissingId, 'offset');
  t.deepEqual(c.ingressTopics, [
    { topic: 'orders', queue: 'o', dlq: 'orders-errors' },
    { topic: 'pay', queue: 'pay' },
  ]);
  const d = loadConfig({});
  t.is(d.kafkaSasl, undefined);
  t.is(d.kafkaTls, undefined);
  t.is(d.ingressErrorsTolerance, 'all');
  t.is(d.ingressDlqErrorsTolerance, 'none', 'a failing dead-letter write halts by default');
  t.is(d.ingressMissingId, 'dlq', 'no silent fallback to offsets');
});

test('a bad value names the variable and its limit', (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ QUEEN_HTTP_PORT: '70000' }, /QUEEN_HTTP_PORT must be an integer between 0 and 65535/],
    [{ QUEEN_HTTP_PORT: 'abc' }, /QUEEN_HTTP_PORT must be an integer/],
    [
      { QUEEN_INGRESS_TOPIC_REFRESH_MS: '500' },
      /QUEEN_INGRESS_TOPIC_REFRESH_MS must be 0 \(only at start\) or between 1000 and 86400000, got 500/,
    ],
    [{ QUEEN_DEDUP_CACHE: 'maybe' }, /QUEEN_DEDUP_CACHE must be one of 1, 0/],
    [{ QUEEN_DEDUP_CACHE_MB: '0' }, /QUEEN_DEDUP_CACHE_MB must be an integer between 1/],
    [{ QUEEN_LOG_LEVEL: 'loud' }, /QUEEN_LOG_LEVEL must be one of fatal/],
    [{ QUEEN_DEDUP_LOOKUP: 'sometimes' }, /QUEEN_DEDUP_LOOKUP must be one of adaptive, apart, in-push/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL must use postgres: or postgresql:/],
    [{ KAFKA_BROKERS: 'nohostport' }, /KAFKA_BROKERS must be a comma-separated list of host:port/],
    [{ QUEEN_INGRESS_TOPICS: 'a', KAFKA_BROKERS: '' }, /KAFKA_BROKERS is empty/],
    [{ QUEEN_INGRESS_TOPICS: 'a:b:c:d', KAFKA_BROKERS: 'h:1' }, /QUEEN_INGRESS_TOPICS entries must be/],
    [{ QUEEN_INGRESS_TOPICS: 'a:b:bad name', KAFKA_BROKERS: 'h:1' }, /QUEEN_INGRESS_TOPICS entries must be/],
    [{ QUEEN_INGRESS_TOPICS: 'a:b:a', KAFKA_BROKERS: 'h:1' }, /cannot be its own dead-letter topic/],
    [{ QUEEN_INGRESS_ERRORS_TOLERANCE: 'some' }, /QUEEN_INGRESS_ERRORS_TOLERANCE must be one of all, none/],
    [{ QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE: 'some' }, /QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE must be one of none, all/],
    [{ QUEEN_INGRESS_MISSING_ID: 'key' }, /QUEEN_INGRESS_MISSING_ID must be one of dlq, fail, offset/],
    [{ KAFKA_SASL_MECHANISM: 'gssapi' }, /KAFKA_SASL_MECHANISM must be one of plain, scram-sha-256, scram-sha-512/],
    [{ KAFKA_SASL_MECHANISM: 'scram-sha-256', KAFKA_SASL_PASSWORD: 'x' }, /needs KAFKA_SASL_USERNAME/],
    [{ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u' }, /needs KAFKA_SASL_PASSWORD/],
    [{ KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p' }, /KAFKA_SASL_MECHANISM is not/],
    [{ KAFKA_SSL_CA_FILE: '/nonexistent/ca.pem' }, /KAFKA_SSL_CA_FILE: cannot read/],
    [{ KAFKA_SSL_CA_FILE: '/etc/hostname' }, /is not a PEM file/],
    [{ KAFKA_CLIENT_ID: 'a b' }, /KAFKA_CLIENT_ID must match/],
    [{ QUEEN_BUNDLE_MAX_BYTES: '2048', QUEEN_MAX_PAYLOAD_BYTES: '4096' }, /QUEEN_BUNDLE_MAX_BYTES \(2048\) must be at least/],
  ];
  for (const [env, re] of cases) {
    const err = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.regex(err.message, re);
  }
});

test('topic mapping: topic or topic:queue', (t) => {
  t.deepEqual(parseTopics('orders, payments:billing'), [
    { topic: 'orders', queue: 'orders' },
    { topic: 'payments', queue: 'billing' },
  ]);
  t.throws(() => parseTopics('a,a'), { message: /twice/ });
});

test('redactUrl hides the password', (t) => {
  t.is(redactUrl('postgres://u:secret@h:5432/db'), 'postgres://u:***@h:5432/db');
  t.false(redactUrl('postgres://u:secret@h/db').includes('secret'));
});

test('QUEEN_INGRESS_MAPPING: per-topic id and partition sources, validated', (t) => {
  const c = loadConfig({
    KAFKA_BROKERS: 'h:1',
    QUEEN_INGRESS_TOPICS: 'orders,clicks,plain',
    QUEEN_INGRESS_MISSING_ID: 'fail',
    QUEEN_INGRESS_MAPPING: JSON.stringify({
      orders: { transactionId: ['header:eventId', 'json:/meta/id'], partition: 'json:/customer' },
      clicks: { transactionId: 'key', partition: 'constant:all', missingId: 'offset' },
    }),
  });
  t.deepEqual(c.ingressTopics, [
    {
      topic: 'orders',
      queue: 'orders',
      mapping: {
        transactionId: [{ header: 'eventId' }, { jsonPointer: '/meta/id' }],
        partition: { jsonPointer: '/customer' },
        missingId: 'fail',
      },
    },
    { topic: 'clicks', queue: 'clicks', mapping: { transactionId: [{ key: true }], partition: { constant: 'all' }, missingId: 'offset' } },
    { topic: 'plain', queue: 'plain' },
  ]);
  const topics = [{ topic: 'a', queue: 'a' }];
  const bad: [string, RegExp][] = [
    ['not json', /must be a JSON object from topic to mapping/],
    ['[]', /must be a JSON object/],
    ['{"b":{}}', /\["b"\]: topic is not in QUEEN_INGRESS_TOPICS/],
    ['{"a":{"id":"key"}}', /unknown field "id"/],
    ['{"a":{"transactionId":[]}}', /at least one source/],
    ['{"a":{"transactionId":"body"}}', /must be one of header:<name>, key, json:<pointer>, offset/],
    ['{"a":{"transactionId":"header"}}', /must be written header:<name>/],
    ['{"a":{"transactionId":"key:x"}}', /must be written key/],
    ['{"a":{"transactionId":"json:id"}}', /not a JSON pointer/],
    ['{"a":{"transactionId":"json:/a~2"}}', /not a JSON pointer/],
    ['{"a":{"transactionId":["offset","key"]}}', /can only be the last source/],
    ['{"a":{"partition":"offset"}}', /must be one of key, header:<name>, json:<pointer>, constant:<name>/],
    ['{"a":{"missingId":"skip"}}', /missingId must be one of dlq, fail, offset/],
  ];
  for (const [raw, re] of bad) {
    const err = t.throws(() => parseMappings(raw, topics, 'dlq'), { instanceOf: ConfigError }, raw);
    t.regex(err.message, re, raw);
  }
});

test('schema registry: none by default; URLs, basic auth from a password file, a CA file, a timeout', (t) => {
  t.is(loadConfig({}).schemaRegistry, undefined);
  const dir = mkdtempSync(join(tmpdir(), 'sr-'));
  writeFileSync(join(dir, 'pw'), 'file-s3cret\n');
  writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  const c = loadConfig({
    QUEEN_SCHEMA_REGISTRY_URL: 'https://sr-1:8081, https://sr-2:8081',
    QUEEN_SCHEMA_REGISTRY_USER: 'svc',
    QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE: join(dir, 'pw'),
    QUEEN_SCHEMA_REGISTRY_CA_FILE: join(dir, 'ca.pem'),
    QUEEN_SCHEMA_REGISTRY_TIMEOUT_MS: '2500',
  });
  t.deepEqual(c.schemaRegistry, {
    urls: ['https://sr-1:8081', 'https://sr-2:8081'],
    basicAuth: { user: 'svc', password: 'file-s3cret' },
    ca: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
    timeoutMs: 2500,
  });
  t.deepEqual(loadConfig({ QUEEN_SCHEMA_REGISTRY_URL: 'http://sr:8081' }).schemaRegistry, {
    urls: ['http://sr:8081'],
    basicAuth: undefined,
    ca: undefined,
    timeoutMs: 5000,
  });
});

test('schema registry settings are refused with a reason that never echoes a secret', (t) => {
  const refused = (env: Record<string, string>, re: RegExp) => {
    const err = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.regex(err.message, re);
    t.false(err.message.includes('s3cret'), err.message);
  };
  refused({ QUEEN_SCHEMA_REGISTRY_URL: 'https://svc:s3cret@sr:8081' }, /carries credentials: set QUEEN_SCHEMA_REGISTRY_USER/);
  refused({ QUEEN_SCHEMA_REGISTRY_URL: 'ftp://sr' }, /must use http: or https:/);
  refused(
    { QUEEN_SCHEMA_REGISTRY_URL: 'http://sr', QUEEN_SCHEMA_REGISTRY_USER: 'svc' },
    /USER and QUEEN_SCHEMA_REGISTRY_PASSWORD\(_FILE\) go together/,
  );
  refused({ QUEEN_SCHEMA_REGISTRY_URL: 'http://sr', QUEEN_SCHEMA_REGISTRY_PASSWORD: 's3cret' }, /go together/);
  refused(
    {
      QUEEN_SCHEMA_REGISTRY_URL: 'http://sr',
      QUEEN_SCHEMA_REGISTRY_USER: 'svc',
      QUEEN_SCHEMA_REGISTRY_PASSWORD: 's3cret',
      QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE: '/x',
    },
    /not both/,
  );
  refused({ QUEEN_SCHEMA_REGISTRY_USER: 'svc', QUEEN_SCHEMA_REGISTRY_PASSWORD: 's3cret' }, /QUEEN_SCHEMA_REGISTRY_URL is not/);
  const dir = mkdtempSync(join(tmpdir(), 'sr-'));
  writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  refused(
    { QUEEN_SCHEMA_REGISTRY_URL: 'http://sr', QUEEN_SCHEMA_REGISTRY_CA_FILE: join(dir, 'ca.pem') },
    /no QUEEN_SCHEMA_REGISTRY_URL is https/,
  );
});
