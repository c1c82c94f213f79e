import test from 'ava';
import { mapRecord } from '../../src/ingress/recordMapping.js';

const rec = (o: Partial<{ key: Buffer | null; value: Buffer | null; offset: string; headers: Record<string, Buffer | string> }>) => ({
  key: null,
  value: Buffer.from('{}'),
  offset: '7',
  ...o,
});

test('key -> partition, null key -> Default', (t) => {
  const a = mapRecord('orders', 'q', 3, rec({ key: Buffer.from('customer-42') }));
  t.true(a.ok && a.item.partition === 'customer-42' && a.item.queue === 'q');
  const b = mapRecord('orders', 'q', 3, rec({}));
  t.true(b.ok && b.item.partition === 'Default');
});

test('transactionId: header, then JSON field, then topic/partition/offset', (t) => {
  const h = mapRecord(
    'orders',
    'q',
    3,
    rec({ headers: { transactionId: 'from-header' }, value: Buffer.from('{"transactionId":"from-json"}') }),
  );
  t.true(h.ok && h.item.transactionId === 'from-header');
  const j = mapRecord('orders', 'q', 3, rec({ value: Buffer.from(' {"transactionId":"from-json"}') }));
  t.true(j.ok && j.item.transactionId === 'from-json');
  for (const value of ['[1,2]', 'not json', '{"transactionId": 5}', '{"transactionId": ""}', '{broken']) {
    const d = mapRecord('orders', 'q', 3, rec({ value: Buffer.from(value) }));
    t.true(d.ok && d.item.transactionId === 'orders/3/7', value);
  }
});

test('trace context from traceparent and tracestate headers', (t) => {
  const m = mapRecord('o', 'q', 0, rec({ headers: { traceparent: '00-abc-def-01', tracestate: 'k=v' } }));
  t.true(m.ok && m.item.traceContext === '00-abc-def-01;k=v');
});

test('null value and non-UTF-8 key are rejected with a reason', (t) => {
  const n = mapRecord('o', 'q', 0, rec({ value: null }));
  t.false(n.ok);
  t.regex((n as { reason: string }).reason, /null/);
  const k = mapRecord('o', 'q', 0, rec({ key: Buffer.from([0xff]) }));
  t.false(k.ok);
});
