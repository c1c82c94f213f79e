import { decodeOrigin, frameOf, originSize, originSource, packSegment, unpackSegment, type Frame } from '../src/engine/frames.js';
import { mapRecord, type KafkaRecord } from '../src/ingress/recordMapping.js';
import { uuidv7Bytes } from '../src/util/uuidv7.js';

/**
 * What keeping a Kafka record's origin (topic, partition, offset, timestamp,
 * headers; frame format v2) costs per record, in one process and no I/O:
 * mapping a record with keepOrigin off and on (with the origin's size check
 * the writer makes), then packing a 1,000-frame segment, then unpacking it and decoding every origin
 * (what a pop of the whole segment does). Records carry three headers as an
 * instrumented producer sends them (transactionId, traceparent,
 * content-type) and ~300 B JSON values. Min and median ns per record over 60
 * repetitions, and the bytes a frame grows by.
 * `node dist/bench/originCost.js`
 */
const N = 1000;
const records: KafkaRecord[] = Array.from({ length: N }, (_, i) => ({
  key: Buffer.from(`customer-${i % 32}`),
  value: Buffer.from(`{"transactionId":"t-${i}","n":${i},"pad":"${'x'.repeat(260)}"}`),
  offset: String(1_000_000 + i),
  timestamp: String(1_764_870_000_000 + i),
  headers: {
    transactionId: Buffer.from(`t-${i}`),
    traceparent: Buffer.from(`00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033${String(i % 100).padStart(2, '0')}-01`),
    'content-type': Buffer.from('application/json'),
  },
}));

function time(label: string, fn: () => void): void {
  const perRecord: number[] = [];
  for (let rep = 0; rep < 60; rep++) {
    const t = process.hrtime.bigint();
    fn();
    perRecord.push(Number(process.hrtime.bigint() - t) / N);
  }
  perRecord.sort((a, b) => a - b);
  console.log(`${label.padEnd(52)} min ${perRecord[0]!.toFixed(0)} ns, median ${perRecord[30]!.toFixed(0)} ns per record`);
}

// Shared by the chunk's records, as chunkVerifier makes it.
const source = originSource('orders', 3);
const framesOf = (keep: boolean): Frame[] =>
  records.map((r) => {
    const m = mapRecord('orders', 'orders', 3, r, { missingId: 'dlq', keepOrigin: keep }, source);
    if (!m.ok) throw new Error(m.reason);
    return {
      ...frameOf({ id: uuidv7Bytes(), transactionId: m.item.transactionId!, payload: m.item.payload, origin: m.item.origin }),
      originSize: m.item.origin && originSize(m.item.origin),
    };
  });

const v1 = packSegment(framesOf(false));
const v2 = packSegment(framesOf(true));
console.log(
  `frame bytes: v1 ${(v1.length / N).toFixed(1)}, v2 ${(v2.length / N).toFixed(1)} per record (+${((v2.length - v1.length) / N).toFixed(1)})`,
);
for (let round = 0; round < 3; round++) {
  time('map, keepOrigin off', () => void framesOf(false));
  time('map + size origin, keepOrigin on', () => void framesOf(true));
  const f1 = framesOf(false);
  const f2 = framesOf(true);
  time('pack segment v1 (no origin)', () => void packSegment(f1));
  time('pack segment v2 (origins)', () => void packSegment(f2));
  time('unpack segment v1', () => void unpackSegment(v1));
  time('unpack segment v2 + decode every origin', () => {
    for (const f of unpackSegment(v2)) decodeOrigin(f.origin!);
  });
}
