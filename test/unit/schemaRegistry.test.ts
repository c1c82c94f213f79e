import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { MockClient, RestError, SchemaRegistryClient, type Client } from '@confluentinc/schemaregistry';
import { loadConfig } from '../../src/config.js';
import { SchemaRegistryError } from '../../src/errors.js';
import { mapRecord, type MappingOptions } from '../../src/ingress/recordMapping.js';
import { registryFailure, SchemaRegistryDecoder, type FetchHooks } from '../../src/ingress/schemaRegistry.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { FakeSchemaRegistry } from '../helpers/fakeSchemaRegistry.js';
import { framers } from '../helpers/registryFixtures.js';

// Framed bytes come from Confluent's own serializers against the library's
// MockClient (an in-memory registry); the decoder under test reads them
// through the same client, as it would a registry over HTTP.

function mock(): Client {
  return new MockClient({ baseURLs: ['mock://'] });
}

function decoderOn(client: Client, unknownTtlMs?: number): SchemaRegistryDecoder {
  return new SchemaRegistryDecoder({ text: client, serialized: client }, silentLogger, undefined, unknownTtlMs);
}

const rec = (value: Buffer, offset = '0') => ({ key: Buffer.from('k'), value, offset, headers: {} });

/** Fetch for the chunk, then map each record, as the ingress does. */
async function mapAll(d: SchemaRegistryDecoder, topic: string, values: Buffer[], mapping: Partial<MappingOptions> = {}) {
  const records = values.map((v, i) => rec(v, String(i)));
  if (d.needsFetch(records)) await d.fetchMissing(topic, records);
  return records.map((r) => mapRecord(topic, 'q', 0, r, { missingId: 'dlq', registry: d, ...mapping }));
}

const ID_FROM_ORDER = { transactionId: [{ jsonPointer: '/orderId' }], partition: { jsonPointer: '/customer' } } as const;

test('Avro through the registry: stored as JSON, and a JSON pointer reads the decoded record (id and partition)', async (t) => {
  const client = mock();
  const f = framers(client);
  const order = { orderId: 'o-1', customer: 'c-9', cents: 1250, note: 'gift', tag: Buffer.from('hi') };
  const bytes = await f.avro('orders', order);
  t.is(bytes[0], 0, 'framed by the serializer');
  const [m] = await mapAll(decoderOn(client), 'orders', [bytes], ID_FROM_ORDER);
  if (!m?.ok) return t.fail(JSON.stringify(m));
  t.is(m.item.transactionId, 'o-1');
  t.is(m.item.partition, 'c-9');
  t.deepEqual(JSON.parse(m.item.payload.toString()), { orderId: 'o-1', customer: 'c-9', cents: 1250, note: 'gift', tag: 'aGk=' });
});

test('a re-send of the same Avro event maps to the same transactionId (dedup by a decoded field), a new event to its own', async (t) => {
  const client = mock();
  const f = framers(client);
  const a = { orderId: 'o-1', customer: 'c', cents: 1, note: null, tag: Buffer.alloc(0) };
  const values = [await f.avro('orders', a), await f.avro('orders', a), await f.avro('orders', { ...a, orderId: 'o-2' })];
  const mapped = await mapAll(decoderOn(client), 'orders', values, ID_FROM_ORDER);
  t.deepEqual(
    mapped.map((m) => (m.ok ? m.item.transactionId : m.reason)),
    ['o-1', 'o-1', 'o-2'],
  );
  t.is(JSON.parse((mapped[0] as { item: { payload: Buffer } }).item.payload.toString()).note, null, 'a null union branch is null');
});

test('Protobuf through the registry: the message indexes pick the message, fields by their .proto names, every field present', async (t) => {
  const client = mock();
  const f = framers(client);
  const order = await f.protobuf('pay', 'Order', { seq: 7n, orderId: 'p-1', customer: 'c-1' });
  const refund = await f.protobuf('pay', 'Refund', { refundId: 'r-1' });
  const empty = await f.protobuf('pay', 'Order', { orderId: 'p-2' });
  const d = decoderOn(client);
  const mapped = await mapAll(d, 'pay', [order, refund, empty], {
    transactionId: [{ jsonPointer: '/order_id' }, { jsonPointer: '/refund_id' }],
  });
  const ok = mapped.map((m) => {
    if (!m.ok) throw new Error(m.reason);
    return { id: m.item.transactionId, json: JSON.parse(m.item.payload.toString()) as unknown };
  });
  t.deepEqual(ok, [
    { id: 'p-1', json: { seq: '7', order_id: 'p-1', customer: 'c-1' } },
    { id: 'r-1', json: { refund_id: 'r-1' } },
    { id: 'p-2', json: { seq: '0', order_id: 'p-2', customer: '' } },
  ]);
  t.is(d.cachedIds().length, 1, 'one schema id for both messages of shop.proto');
});

test('JSON Schema through the registry: the payload after the 5-byte header, as the producer wrote it', async (t) => {
  const client = mock();
  const bytes = await framers(client).json('js', { transactionId: 'j-1', n: 2 });
  const [m] = await mapAll(decoderOn(client), 'js', [bytes]);
  if (!m?.ok) return t.fail(JSON.stringify(m));
  t.is(m.item.transactionId, 'j-1');
  t.is(m.item.payload.toString(), '{"transactionId":"j-1","n":2}');
});

test('an unknown schema id is a per-record dead letter with its reason, remembered for a while, then asked again', async (t) => {
  const client = mock();
  const good = await framers(client).json('js', { transactionId: 'j-1' });
  const unknown = Buffer.concat([Buffer.from([0, 0, 0, 0x30, 0x39]), Buffer.from('{"transactionId":"x"}')]);
  const d = decoderOn(client);
  const [a, b] = await mapAll(d, 'js', [good, unknown]);
  t.true(a?.ok);
  t.like(b, { ok: false, stage: 'VALUE_CONVERTER', halt: false });
  t.regex((b as { reason: string }).reason, /schema id 12345 is not in the schema registry \(.*HTTP 404/);
  t.false(d.needsFetch([rec(unknown)]), 'the answer is remembered: no request per chunk');
  const short = decoderOn(client, 0);
  await mapAll(short, 'js', [unknown]);
  t.true(short.needsFetch([rec(unknown)]), 'after its time an unknown id is asked for again (it may have been registered since)');
});

test('bytes that do not decode under their schema are per-record dead letters with the reason', async (t) => {
  const client = mock();
  const f = framers(client);
  const avro = await f.avro('orders', { orderId: 'o-1', customer: 'c', cents: 5, note: null, tag: Buffer.from('x') });
  const proto = await f.protobuf('pay', 'Order', { orderId: 'p-1' });
  const json = await f.json('js', { transactionId: 'j-1' });
  const truncated = avro.subarray(0, avro.length - 2);
  const badProto = Buffer.concat([proto.subarray(0, 6), Buffer.from([0x12, 0x50, 0x61])]); // a length past the end
  const notJson = Buffer.concat([json.subarray(0, 5), Buffer.from('not json')]);
  const d = decoderOn(client);
  const mapped = [
    ...(await mapAll(d, 'orders', [truncated])),
    ...(await mapAll(d, 'pay', [badProto])),
    ...(await mapAll(d, 'js', [notJson])),
  ];
  const reasons = mapped.map((m) => (m.ok ? 'stored' : m.reason));
  t.regex(reasons[0]!, /schema id \d+: the AVRO value does not decode under its schema/);
  t.regex(reasons[1]!, /schema id \d+: the PROTOBUF value does not decode under its schema/);
  t.regex(reasons[2]!, /schema id \d+: the JSON Schema value is not JSON/);
  t.true(mapped.every((m) => !m.ok && !m.halt && m.stage === 'VALUE_CONVERTER'));
});

/** A port nothing listens on: connections are refused at once. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

test('a registry that does not answer is a retriable failure: nothing cached, nothing dead-lettered', async (t) => {
  const url = `http://127.0.0.1:${await closedPort()}`;
  const d = SchemaRegistryDecoder.fromConfig({ urls: [url], basicAuth: undefined, ca: undefined, timeoutMs: 2_000 }, silentLogger);
  const value = Buffer.from([0, 0, 0, 0, 1, 0x02, 0x41]);
  const err = await t.throwsAsync(d.fetchMissing('orders', [rec(value)]), { instanceOf: SchemaRegistryError });
  t.true(err.retriable);
  t.is(err.status, undefined);
  t.regex(err.message, /fetching schema id 1: no answer \(ECONNREFUSED\)/);
  t.true(d.needsFetch([rec(value)]), 'still to be fetched');
  t.deepEqual(d.cachedIds(), []);
});

test('registry answers are classified by REGISTRY_ANSWERS: only its own 404 is a verdict on the record', (t) => {
  const cls = (status: number, code: number) => registryFailure(new RestError('m', status, code), 'w')!.retriable;
  t.false(cls(404, 40403), 'Schema not found');
  t.false(cls(404, 40400), 'the client library says 40400');
  t.true(cls(404, -1), 'a 404 without a registry body: a proxy or a wrong base path');
  t.true(cls(401, 40101));
  t.true(cls(403, 40301));
  t.true(cls(500, 50001));
  t.true(cls(503, 50003));
  t.true(cls(429, 42901));
  t.true(cls(422, 42201), 'any other refusal of our request is not the record');
  t.is(registryFailure(new Error('schema parse'), 'w'), undefined, 'not a registry failure');
});

test('basic auth: the credentials reach the registry; refused ones are a retriable 401 that names no secret', async (t) => {
  const auth = { user: 'svc', password: 's3cret-pw' };
  const reg = await FakeSchemaRegistry.start({ auth });
  t.teardown(() => reg.stop());
  const bytes = await framers(clientFor(reg.url, auth)).json('js', { transactionId: 'j-1' });
  const good = SchemaRegistryDecoder.fromConfig({ urls: [reg.url], basicAuth: auth, ca: undefined, timeoutMs: 2_000 }, silentLogger);
  await good.fetchMissing('js', [rec(bytes)]);
  t.deepEqual(good.cachedIds(), [bytes.readUInt32BE(1)]);
  const wrong = SchemaRegistryDecoder.fromConfig(
    { urls: [reg.url], basicAuth: { user: 'svc', password: 'wrong' }, ca: undefined, timeoutMs: 2_000 },
    silentLogger,
  );
  const err = await t.throwsAsync(wrong.fetchMissing('js', [rec(bytes)]), { instanceOf: SchemaRegistryError });
  t.true(err.retriable);
  t.is(err.status, 401);
  t.false(err.message.includes('s3cret') || err.message.includes('wrong'), err.message);
});

/** A producer's client of a registry over HTTP (its serializers register there). */
function clientFor(url: string, auth?: { user: string; password: string }): Client {
  return new SchemaRegistryClient({
    baseURLs: [url],
    ...(auth ? { basicAuthCredentials: { credentialsSource: 'USER_INFO', userInfo: `${auth.user}:${auth.password}` } } : {}),
  });
}

test('a chunk whose schemas are cached needs no fetch; an id is fetched once even when chunks ask at once', async (t) => {
  const reg = await FakeSchemaRegistry.start();
  t.teardown(() => reg.stop());
  const bytes = await framers(clientFor(reg.url)).avro('orders', {
    orderId: 'o',
    customer: 'c',
    cents: 1,
    note: null,
    tag: Buffer.alloc(0),
  });
  const id = bytes.readUInt32BE(1);
  const d = SchemaRegistryDecoder.fromConfig({ urls: [reg.url], basicAuth: undefined, ca: undefined, timeoutMs: 2_000 }, silentLogger);
  const chunk = [rec(bytes), rec(bytes)];
  t.true(d.needsFetch(chunk));
  await Promise.all([d.fetchMissing('orders', chunk), d.fetchMissing('orders', chunk), d.fetchMissing('orders', chunk)]);
  t.is(reg.count(`GET /schemas/ids/${id}`), 1);
  t.false(d.needsFetch(chunk), 'cached: the next chunk maps without a promise');
  t.false(d.needsFetch([rec(Buffer.from('{"transactionId":"plain"}'))]), 'an unframed value never needs the registry');
});

function hooks(over: Partial<FetchHooks> = {}): FetchHooks & { halts: string[]; resumes: number } {
  const h = {
    halts: [] as string[],
    resumes: 0,
    isRunning: () => true,
    isStale: () => false,
    signal: new AbortController().signal,
    halt: (reason: string) => void h.halts.push(reason),
    resume: () => {
      h.resumes++;
    },
    ...over,
  };
  return h;
}

test('fetchUntilDone halts the partition from the first failure, names the cause, and resumes once the registry answers', async (t) => {
  const reg = await FakeSchemaRegistry.start();
  t.teardown(() => reg.stop());
  const bytes = await framers(clientFor(reg.url)).json('js', { transactionId: 'j-1' });
  const d = SchemaRegistryDecoder.fromConfig({ urls: [reg.url], basicAuth: undefined, ca: undefined, timeoutMs: 2_000 }, silentLogger);
  reg.down(true);
  const h = hooks({
    halt: (reason) => {
      h.halts.push(reason);
      if (h.halts.length === 2) reg.down(false); // the registry comes back after the second failure
    },
  });
  t.true(await d.fetchUntilDone('js', [rec(bytes)], h));
  t.is(h.halts.length, 2);
  t.regex(h.halts[0]!, /^schema registry failing since \S+ \(1 attempts, retrying with backoff\): fetching schema id \d+: HTTP 503/);
  t.is(h.resumes, 1);
  t.false(d.needsFetch([rec(bytes)]));
});

test('fetchUntilDone gives up when its chunk is abandoned (shutdown), resuming the partition, and reports it', async (t) => {
  const reg = await FakeSchemaRegistry.start();
  t.teardown(() => reg.stop());
  const bytes = await framers(clientFor(reg.url)).json('js', { transactionId: 'j-1' });
  const d = SchemaRegistryDecoder.fromConfig({ urls: [reg.url], basicAuth: undefined, ca: undefined, timeoutMs: 2_000 }, silentLogger);
  reg.down(true);
  const stop = new AbortController();
  const h = hooks({
    signal: stop.signal,
    halt: (reason) => {
      h.halts.push(reason);
      stop.abort();
    },
  });
  t.false(await d.fetchUntilDone('js', [rec(bytes)], h));
  t.is(h.halts.length, 1);
  t.is(h.resumes, 1);
});

test('TLS: an https registry signed by QUEEN_SCHEMA_REGISTRY_CA_FILE is used; without the CA it is a retriable failure', async (t) => {
  // A self-signed certificate for 127.0.0.1, its own CA, made by openssl here.
  const dir = mkdtempSync(join(tmpdir(), 'sr-tls-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  const tls = { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  const reg = await FakeSchemaRegistry.start({ tls });
  t.teardown(() => reg.stop());
  const producer = new SchemaRegistryClient({ baseURLs: [reg.url], createAxiosDefaults: { httpsAgent: new Agent({ ca: tls.cert }) } });
  const bytes = await framers(producer).json('js', { transactionId: 'j-1' });
  const config = loadConfig({ QUEEN_SCHEMA_REGISTRY_URL: reg.url, QUEEN_SCHEMA_REGISTRY_CA_FILE: join(dir, 'cert.pem') }).schemaRegistry!;
  const trusted = SchemaRegistryDecoder.fromConfig(config, silentLogger);
  await trusted.fetchMissing('js', [rec(bytes)]);
  t.deepEqual(trusted.cachedIds(), [bytes.readUInt32BE(1)]);
  const untrusted = SchemaRegistryDecoder.fromConfig({ ...config, ca: undefined }, silentLogger);
  const err = await t.throwsAsync(untrusted.fetchMissing('js', [rec(bytes)]), { instanceOf: SchemaRegistryError });
  t.true(err.retriable);
  t.regex(err.message, /no answer \((DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE)\)/);
});

test('a chunk naming more unknown ids than are remembered still dead-letters each of them (binary values that are not frames)', async (t) => {
  const client = mock();
  const good = await framers(client).json('js', { transactionId: 'j-1' });
  const d = decoderOn(client);
  const noise = Array.from({ length: 1100 }, (_, i) => {
    const b = Buffer.from([0, 0, 0, 0, 0, 0x41, 0x42]);
    b.writeUInt32BE(100_000 + i, 1);
    return b;
  });
  t.is(d.firstToFetch([rec(Buffer.from('{}')), rec(good)]), 1, 'the first record that needs the registry');
  const mapped = await mapAll(d, 'js', [good, ...noise]);
  t.true(mapped[0]!.ok);
  const rejected = mapped.slice(1);
  t.true(
    rejected.every((m) => !m.ok && !m.halt && /^schema id \d+ is not in the schema registry/.test(m.reason)),
    'every one a per-record dead letter',
  );
});
