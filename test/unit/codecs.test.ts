import { createRequire } from 'node:module';
import test from 'ava';
import kafkajs from 'kafkajs';
import { codecStats, registerCodecs, snappyDecodeKafka, snappyEncodeKafka, undecodableReason } from '../../src/ingress/codecs.js';

// kafkajs's own record-batch encoder and decoder: the exact code the consumer runs on a fetch.
const require = createRequire(import.meta.url);
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as {
  RecordBatch: (o: object) => Promise<{ buffer: Buffer }>;
};
const RecordBatchDecoder = require('kafkajs/src/protocol/recordBatch/v0/decoder.js') as (
  d: unknown,
) => Promise<{ records: { offset: string; key: Buffer | null; value: Buffer | null; headers: Record<string, Buffer> }[] }>;
const Record = require('kafkajs/src/protocol/recordBatch/record/v0/index.js') as (o: object) => unknown;
const Decoder = require('kafkajs/src/protocol/decoder.js') as new (b: Buffer) => unknown;

registerCodecs();
const { CompressionTypes } = kafkajs;

async function batch(compression: number, n: number, firstOffset: number): Promise<Buffer> {
  const records = Array.from({ length: n }, (_, i) =>
    Record({
      offsetDelta: i,
      key: Buffer.from(`k${i}`),
      value: Buffer.from(`value-${i}-`.repeat(20)),
      headers: { transactionId: `t${i}` },
    }),
  );
  // The Long firstOffset kafkajs expects.
  const Long = require('kafkajs/src/utils/long.js') as { fromInt: (n: number) => unknown };
  return (await RecordBatch({ compression, records, firstOffset: Long.fromInt(firstOffset), lastOffsetDelta: n - 1 })).buffer;
}

for (const [name, type] of [
  ['lz4', CompressionTypes.LZ4],
  ['zstd', CompressionTypes.ZSTD],
  ['snappy', CompressionTypes.Snappy],
] as const) {
  test(`${name}: a batch round-trips through kafkajs's encoder and decoder`, async (t) => {
    const before = codecStats().decoded[name];
    const decoded = await RecordBatchDecoder(new Decoder(await batch(type, 50, 1000)));
    t.is(decoded.records.length, 50);
    t.deepEqual(
      decoded.records.map((r) => r.offset),
      Array.from({ length: 50 }, (_, i) => String(1000 + i)),
    );
    t.is(decoded.records[7]!.headers.transactionId!.toString(), 't7');
    t.is(decoded.records[7]!.value!.toString(), 'value-7-'.repeat(20));
    t.is(codecStats().decoded[name], before + 1);
  });

  test(`${name}: an undecodable batch becomes one dead-letter stand-in per offset, not a crash`, async (t) => {
    const buf = await batch(type, 5, 40);
    // Corrupt the compressed payload (everything after the 61-byte header + 4-byte record count... keep the header intact).
    for (let i = 70; i < buf.length; i++) buf[i] = 0xa5;
    const decoded = await RecordBatchDecoder(new Decoder(buf));
    t.deepEqual(
      decoded.records.map((r) => r.offset),
      ['40', '41', '42', '43', '44'],
    );
    for (const r of decoded.records) {
      const reason = undecodableReason({ key: r.key, value: r.value, offset: r.offset, headers: r.headers });
      t.truthy(reason);
      t.regex(reason!, new RegExp(`^undecodable ${name} batch: `));
    }
    t.true(decoded.records[0]!.value!.length > 0, 'the first stand-in keeps the raw compressed bytes');
  });
}

test('a forged undecodable header (no process nonce) is an ordinary header', (t) => {
  t.is(
    undecodableReason({
      key: null,
      value: Buffer.from('x'),
      offset: '1',
      headers: { 'queen-undecodable': Buffer.from('abc\x1flz4\x1fnope') },
    }),
    undefined,
  );
});

test('snappy: xerial framing (the Java client) and bare blocks both decode', (t) => {
  const data = Buffer.from('hello kafka '.repeat(10_000));
  const framed = snappyEncodeKafka(data);
  t.is(framed.subarray(1, 7).toString(), 'SNAPPY');
  t.deepEqual(snappyDecodeKafka(framed), data);
});
