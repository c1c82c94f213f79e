import { MockClient } from '@confluentinc/schemaregistry';
import { mapRecord, type MappingOptions } from '../src/ingress/recordMapping.js';
import { SchemaRegistryDecoder } from '../src/ingress/schemaRegistry.js';
import { silentLogger } from '../src/telemetry/logger.js';
import { framers } from '../test/helpers/registryFixtures.js';

/**
 * What a configured Schema Registry costs a chunk's mapping, per record, in
 * one process and no I/O (the registry is the library's MockClient, every
 * schema already cached): unframed JSON without a registry, the same with one
 * configured (needsFetch's loop over the chunk, then mapRecord), and framed
 * Avro decoded from the cache. 5,000-record chunks, 80 repetitions, min and
 * median ns/record. `node dist/bench/registryHotPath.js`
 */
const N = 5000;
const client = new MockClient({ baseURLs: ['mock://'] });
const decoder = new SchemaRegistryDecoder({ text: client, serialized: client }, silentLogger);
const f = framers(client);
const rec = (value: Buffer, i: number) => ({ key: Buffer.from('k'), value, offset: String(i), headers: {} });
const plain = Array.from({ length: N }, (_, i) => rec(Buffer.from(`{"transactionId":"t-${i}","n":${i},"pad":"${'x'.repeat(44)}"}`), i));
const avro = [];
for (let i = 0; i < N; i++)
  avro.push(rec(await f.avro('o', { orderId: `o-${i}`, customer: 'c', cents: i, note: null, tag: Buffer.from('x') }), i));
await decoder.fetchMissing('o', avro);

function run(label: string, records: typeof plain, opts: MappingOptions): void {
  const perRecord: number[] = [];
  for (let rep = 0; rep < 80; rep++) {
    const t = process.hrtime.bigint();
    if (opts.registry && decoder.needsFetch(records)) throw new Error('a schema was not cached');
    for (const r of records) if (!mapRecord('o', 'q', 0, r, opts).ok) throw new Error('a record did not map');
    perRecord.push(Number(process.hrtime.bigint() - t) / records.length);
  }
  perRecord.sort((a, b) => a - b);
  console.log(`${label.padEnd(56)} min ${perRecord[0]!.toFixed(0)} ns, median ${perRecord[40]!.toFixed(0)} ns per record`);
}

for (let round = 0; round < 3; round++) {
  run('unframed JSON, no registry', plain, { missingId: 'dlq' });
  run('unframed JSON, registry configured', plain, { missingId: 'dlq', registry: decoder });
  run('framed Avro, schema cached (decode + map)', avro, {
    missingId: 'dlq',
    registry: decoder,
    transactionId: [{ jsonPointer: '/orderId' }],
  });
}
