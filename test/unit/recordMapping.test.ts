import test from 'ava';
import type { IdSource } from '../../src/config.js';
import { decodeOrigin, encodeOrigin } from '../../src/engine/frames.js';
import { mapRecord, type KafkaRecord, type MappingOptions } from '../../src/ingress/recordMapping.js';

const rec = (o: Partial<KafkaRecord>): KafkaRecord => ({
  key: null,
  value: Buffer.from('{"transactionId":"t"}'),
  offset: '7',
  ...o,
});
const DLQ: MappingOptions = { missingId: 'dlq' };

/** A Confluent-framed value: magic byte 0, 4-byte big-endian schema id, payload. */
function framed(schemaId: number, payload: Buffer | string): Buffer {
  const h = Buffer.alloc(5);
  h.writeUInt32BE(schemaId, 1);
  return Buffer.concat([h, Buffer.from(payload)]);
}

test('key -> partition, null key -> Default', (t) => {
  const a = mapRecord('orders', 'q', 3, rec({ key: Buffer.from('customer-42') }), DLQ);
  t.true(a.ok && a.item.partition === 'customer-42' && a.item.queue === 'q');
  const b = mapRecord('orders', 'q', 3, rec({}), DLQ);
  t.true(b.ok && b.item.partition === 'Default');
});

test('transactionId: header, then JSON field', (t) => {
  const h = mapRecord(
    'orders',
    'q',
    3,
    rec({ headers: { transactionId: 'from-header' }, value: Buffer.from('{"transactionId":"from-json"}') }),
    DLQ,
  );
  t.true(h.ok && h.item.transactionId === 'from-header');
  const j = mapRecord('orders', 'q', 3, rec({ value: Buffer.from(' {"transactionId":"from-json"}') }), DLQ);
  t.true(j.ok && j.item.transactionId === 'from-json');
});

test('a missing transactionId follows the policy: dlq (default) and fail reject, offset derives topic/partition/offset', (t) => {
  for (const value of ['[1,2]', 'not json', '{"transactionId": 5.5}', '{"transactionId": ""}', '{"transactionId": {}}', '{broken']) {
    const d = mapRecord('orders', 'q', 3, rec({ value: Buffer.from(value) }), DLQ);
    t.false(d.ok, value);
    t.like(d, { ok: false, halt: false, stage: 'TRANSFORMATION' }, value);
    t.regex((d as { reason: string }).reason, /no transactionId.*QUEEN_INGRESS_MISSING_ID=dlq/, value);
    const f = mapRecord('orders', 'q', 3, rec({ value: Buffer.from(value) }), { missingId: 'fail' });
    t.like(f, { ok: false, halt: true }, value);
    const o = mapRecord('orders', 'q', 3, rec({ value: Buffer.from(value) }), { missingId: 'offset' });
    t.true(o.ok && o.item.transactionId === 'orders/3/7', value);
  }
});

test('trace context from traceparent and tracestate headers', (t) => {
  const m = mapRecord('o', 'q', 0, rec({ headers: { traceparent: '00-abc-def-01', tracestate: 'k=v' } }), DLQ);
  t.true(m.ok && m.item.traceContext === '00-abc-def-01;k=v');
});

test('a null header value (Kafka allows it) reads as absent and never throws', (t) => {
  const m = mapRecord('o', 'q', 0, rec({ headers: { traceparent: null, tracestate: null, other: null } }), DLQ);
  t.true(m.ok && m.item.traceContext === undefined && m.item.transactionId === 't');
  const arr = mapRecord('o', 'q', 0, rec({ headers: { transactionId: [null, 'second'] } }), DLQ);
  t.true(arr.ok && arr.item.transactionId === 't', 'a null first value is no id; the JSON field applies');
  const none = mapRecord('o', 'q', 0, rec({ value: Buffer.from('x'), headers: { transactionId: null } }), DLQ);
  t.like(none, { ok: false, halt: false });
  const tomb = mapRecord('o', 'q', 0, rec({ value: null, headers: { transactionId: null, x: [null, null] } }), DLQ);
  t.like(tomb, { ok: false, stage: 'VALUE_CONVERTER' });
});

test('null value and non-UTF-8 key are rejected with a reason', (t) => {
  const n = mapRecord('o', 'q', 0, rec({ value: null }), DLQ);
  t.false(n.ok);
  t.regex((n as { reason: string }).reason, /null/);
  const k = mapRecord('o', 'q', 0, rec({ key: Buffer.from([0xff]) }), DLQ);
  t.like(k, { ok: false, stage: 'KEY_CONVERTER' });
});

test('a Confluent-framed JSON Schema value is read after its 5-byte header: stored as JSON, with its id', (t) => {
  const m = mapRecord('o', 'q', 0, rec({ value: framed(1, '{"transactionId":"js-1","n":1}') }), { missingId: 'offset' });
  t.true(m.ok);
  if (!m.ok) return;
  t.is(m.item.transactionId, 'js-1', 'the id comes from the JSON, not the offset');
  t.is(Buffer.from(m.item.payload).toString(), '{"transactionId":"js-1","n":1}', 'stored without the frame');
  // A framed JSON value without an id is a missing id like any other.
  const noId = mapRecord('o', 'q', 0, rec({ value: framed(1, '{"n":1}') }), DLQ);
  t.like(noId, { ok: false, stage: 'TRANSFORMATION' });
});

test('a Confluent-framed value that is not JSON (Avro, Protobuf) is rejected with a reason, even under missingId=offset', (t) => {
  // Avro binary of a record {id: "a1"}: a zigzag length 4, then the bytes.
  const avro = framed(7, Buffer.from([0x04, 0x61, 0x31]));
  for (const headers of [undefined, { transactionId: 'from-header' }]) {
    const m = mapRecord('o', 'q', 0, rec({ value: avro, headers }), { missingId: 'offset' });
    t.like(m, { ok: false, stage: 'VALUE_CONVERTER', halt: false });
    t.regex((m as { reason: string }).reason, /Confluent-framed value \(schema id 7\) is not JSON.*schema registry/);
  }
  // Protobuf: the message indexes (one 0 byte: the first message), then field 2 (a string "p1").
  const protobuf = framed(8, Buffer.from([0x00, 0x12, 0x02, 0x70, 0x31]));
  for (const headers of [undefined, { transactionId: 'from-header' }]) {
    const m = mapRecord('o', 'q', 0, rec({ value: protobuf, headers }), { missingId: 'offset' });
    t.like(m, { ok: false, stage: 'VALUE_CONVERTER', halt: false });
    t.regex((m as { reason: string }).reason, /Confluent-framed value \(schema id 8\) is not JSON.*QUEEN_SCHEMA_REGISTRY_URL/);
  }
  // A short value starting with a 0 byte is not a frame: stored as it is (under an explicit id).
  const short = mapRecord('o', 'q', 0, rec({ value: Buffer.from([0, 1]), headers: { transactionId: 'b' } }), DLQ);
  t.true(short.ok);
});

test('configured id sources: a named header, the key, a JSON pointer, in order; offset only where written', (t) => {
  const value = Buffer.from('{"meta":{"id":"m-1","n":42,"a/b":"slash"},"items":[{"sku":"s-9"}]}');
  const opts = (...sources: IdSource[]): MappingOptions => ({ missingId: 'dlq', transactionId: sources });
  const r = rec({ key: Buffer.from('key-id'), value, headers: { eventId: 'h-1', transactionId: 'ignored' } });
  const id = (o: MappingOptions) => {
    const m = mapRecord('orders', 'q', 3, r, o);
    return m.ok ? String(m.item.transactionId) : `rejected: ${m.reason}`;
  };
  t.is(id(opts({ header: 'eventId' })), 'h-1');
  t.is(id(opts({ key: true })), 'key-id');
  t.is(id(opts({ jsonPointer: '/meta/id' })), 'm-1');
  t.is(id(opts({ jsonPointer: '/meta/n' })), '42', 'an integer is an id');
  t.is(id(opts({ jsonPointer: '/meta/a~1b' })), 'slash', 'RFC 6901 escapes');
  t.is(id(opts({ jsonPointer: '/items/0/sku' })), 's-9', 'array index');
  t.is(id(opts({ header: 'absent' }, { jsonPointer: '/nope' }, { jsonPointer: '/meta/id' })), 'm-1', 'the first source that yields');
  t.is(id(opts({ header: 'absent' }, { offset: true })), 'orders/3/7');
  t.regex(
    id(opts({ header: 'absent' }, { jsonPointer: '/meta' })),
    /^rejected: no transactionId: none of header absent, JSON \/meta gave one/,
  );
  const noKey = mapRecord('orders', 'q', 3, rec({ key: null, value }), opts({ key: true }));
  t.like(noKey, { ok: false, stage: 'TRANSFORMATION' }, 'a null key yields no id');
});

test('configured partition sources: key (default), a header, a JSON pointer, a constant; nothing yielded -> Default', (t) => {
  const value = Buffer.from('{"transactionId":"t","customer":"c-7"}');
  const r = rec({ key: Buffer.from([0xff]), value, headers: { tenant: 'acme' } });
  const partition = (p: MappingOptions['partition']) => {
    const m = mapRecord('o', 'q', 0, r, { missingId: 'dlq', partition: p });
    return m.ok ? String(m.item.partition) : `rejected: ${m.reason}`;
  };
  t.is(partition({ header: 'tenant' }), 'acme', 'a non-UTF-8 key does not matter when the key is not read');
  t.is(partition({ jsonPointer: '/customer' }), 'c-7');
  t.is(partition({ constant: 'all' }), 'all');
  t.is(partition({ header: 'absent' }), 'Default');
  t.is(partition({ jsonPointer: '/absent' }), 'Default');
  t.regex(partition({ key: true }), /^rejected: record key is not valid UTF-8/);
});

test('keepOrigin: topic, Kafka partition, offset, timestamp and every header are kept, null values and repeats included; the id is not affected', (t) => {
  const headers = { transactionId: 'id-1', traceparent: null, bin: Buffer.from([0xff, 0x00]), rep: ['a', null, Buffer.from('c')] };
  const m = mapRecord('orders', 'q', 3, rec({ offset: '9007199254740993', timestamp: '1764870000123', headers }), {
    ...DLQ,
    keepOrigin: true,
  });
  if (!m.ok) return t.fail(m.reason);
  t.is(m.item.transactionId, 'id-1');
  t.deepEqual(decodeOrigin(encodeOrigin(m.item.origin!)), {
    topic: 'orders',
    partition: 3,
    offset: '9007199254740993',
    timestamp: 1764870000123,
    headers: [
      { key: 'transactionId', value: Buffer.from('id-1') },
      { key: 'traceparent', value: null },
      { key: 'bin', value: Buffer.from([0xff, 0x00]) },
      { key: 'rep', value: Buffer.from('a') },
      { key: 'rep', value: null },
      { key: 'rep', value: Buffer.from('c') },
    ],
  });
  const noTs = mapRecord('orders', 'q', 0, rec({ timestamp: '-1' }), { ...DLQ, keepOrigin: true });
  if (!noTs.ok) return t.fail(noTs.reason);
  const back = decodeOrigin(encodeOrigin(noTs.item.origin!));
  t.is(back.timestamp, null);
  t.deepEqual(back.headers, []);
  const off = mapRecord('orders', 'q', 0, rec({ headers }), DLQ);
  t.true(off.ok && off.item.origin === undefined, 'not kept unless asked');
});
