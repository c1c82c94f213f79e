import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { installRecordDecoder } from '../src/ingress/recordDecoder.js';

/**
 * What decoding a fetched record batch costs per record, kafkajs's own record
 * decoder against src/ingress/recordDecoder.ts: kafkajs's record-batch
 * decoder over one 1,000-record uncompressed batch (32 keys, a
 * transactionId header, ~100 B JSON values, as kafka-e2e produces), 2,000
 * decodes after 200 of warm-up, process CPU per record. Each decoder runs
 * in a child process of its own (the replacement is process-wide and must
 * precede kafkajs's first load of the batch decoder), alternated three
 * times. `node dist/bench/recordDecoderCost.js`
 */
const require = createRequire(import.meta.url);
const WARMUP = 200;
const DECODES = 2000;
const RECORDS = 1000;

async function child(mode: 'kafkajs' | 'replaced'): Promise<void> {
  if (mode === 'replaced' && installRecordDecoder() !== 'installed') throw new Error('record decoder not installed');
  const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as {
    RecordBatch: (o: object) => Promise<{ buffer: Buffer }>;
  };
  const Record = require('kafkajs/src/protocol/recordBatch/record/v0/index.js') as (o: object) => unknown;
  const Decoder = require('kafkajs/src/protocol/decoder.js') as new (b: Buffer) => unknown;
  const decode = require('kafkajs/src/protocol/recordBatch/v0/decoder.js') as (d: unknown) => Promise<{ records: unknown[] }>;
  const Long = require('kafkajs/src/utils/long.js') as { fromString: (s: string) => unknown };
  const records = Array.from({ length: RECORDS }, (_, i) =>
    Record({
      offsetDelta: i,
      timestampDelta: i % 50,
      key: Buffer.from(`key-${String(i % 32).padStart(2, '0')}`),
      value: Buffer.from(JSON.stringify({ transactionId: `t-${i}`, n: i, pad: 'x'.repeat(60) })),
      headers: { transactionId: `bench-${i}` },
    }),
  );
  const now = Date.now();
  const { buffer } = await RecordBatch({ firstOffset: Long.fromString('1234567'), firstTimestamp: now, maxTimestamp: now, records });
  let decoded = 0;
  for (let w = 0; w < WARMUP; w++) decoded += (await decode(new Decoder(buffer))).records.length;
  const c0 = process.cpuUsage();
  for (let w = 0; w < DECODES; w++) decoded += (await decode(new Decoder(buffer))).records.length;
  const c = process.cpuUsage(c0);
  if (decoded !== (WARMUP + DECODES) * RECORDS) throw new Error(`decoded ${decoded} records`);
  process.stdout.write(String(((c.user + c.system) * 1000) / (DECODES * RECORDS)));
}

function run(mode: 'kafkajs' | 'replaced'): number {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), mode], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${mode}: ${r.stderr}`);
  return Number(r.stdout);
}

const mode = process.argv[2];
if (mode === 'kafkajs' || mode === 'replaced') await child(mode);
else {
  const ns: Record<string, number[]> = { kafkajs: [], replaced: [] };
  for (let rep = 0; rep < 3; rep++)
    for (const m of rep % 2 === 0 ? (['kafkajs', 'replaced'] as const) : (['replaced', 'kafkajs'] as const)) ns[m]!.push(run(m));
  for (const [m, v] of Object.entries(ns)) {
    v.sort((a, b) => a - b);
    console.log(`${m.padEnd(10)} median ${v[1]!.toFixed(0)} ns CPU per record (runs ${v.map((x) => x.toFixed(0)).join(', ')})`);
  }
}
