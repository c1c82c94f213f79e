import test from 'ava';
import { create, createFileRegistry, createMutableRegistry } from '@bufbuild/protobuf';
import { FieldDescriptorProto_Label, FieldDescriptorProto_Type, FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { AvroSerializer, MockClient, ProtobufSerializer, SerdeType, type Client, type SchemaInfo } from '@confluentinc/schemaregistry';
import { mapRecord } from '../../src/ingress/recordMapping.js';
import { SchemaRegistryDecoder } from '../../src/ingress/schemaRegistry.js';
import { silentLogger } from '../../src/telemetry/logger.js';

// Schemas that reference other schemas, as producers split shared types
// (a Money record, an imported money.proto) into subjects of their own. The
// framed bytes come from Confluent's serializers, which register each
// referenced schema under its own subject; the decoder must fetch and compile
// the whole reference graph before it can decode one value.

/**
 * The library's MockClient returns whatever was registered for every
 * `format`. A real Schema Registry returns a Protobuf schema as .proto text
 * unless `format=serialized` is asked for. This view answers as the real one
 * does, so a request that forgets the format gets text that is not a
 * descriptor, as it would in production.
 */
function asRealRegistry(inner: Client): Client {
  const textForm = (info: SchemaInfo, format?: string): SchemaInfo =>
    info.schemaType === 'PROTOBUF' && format !== 'serialized'
      ? { ...info, schema: 'syntax = "proto3"; // .proto text, not a descriptor' }
      : info;
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === 'getSchemaMetadata')
        return async (subject: string, version: number, deleted?: boolean, format?: string) =>
          textForm(await target.getSchemaMetadata(subject, version, deleted ?? false, format), format);
      if (prop === 'getBySubjectAndId')
        return async (subject: string | undefined, id: number, format?: string) =>
          textForm(await target.getBySubjectAndId(subject ?? '', id, format), format);
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
}

const rec = (value: Buffer, offset = '0') => ({ key: Buffer.from('k'), value, offset, headers: {} });

async function decodeAll(client: Client, topic: string, values: Buffer[], pointer: string) {
  const d = new SchemaRegistryDecoder({ text: client, serialized: client }, silentLogger);
  const records = values.map((v, i) => rec(v, String(i)));
  await d.fetchMissing(topic, records);
  return records.map((r) => mapRecord(topic, 'q', 0, r, { missingId: 'dlq', registry: d, transactionId: [{ jsonPointer: pointer }] }));
}

const MONEY_AVRO = {
  type: 'record',
  name: 'Money',
  namespace: 'shop',
  fields: [
    { name: 'cents', type: 'long' },
    { name: 'currency', type: 'string' },
  ],
};
const PAYMENT_AVRO = {
  type: 'record',
  name: 'Payment',
  namespace: 'shop',
  fields: [
    { name: 'paymentId', type: 'string' },
    { name: 'amount', type: 'shop.Money' },
    { name: 'refund', type: ['null', 'shop.Money'], default: null },
  ],
};

test('Avro referencing a schema of another subject: both are fetched, the value decodes with the referenced record inline', async (t) => {
  const client = asRealRegistry(new MockClient({ baseURLs: ['mock://'] }));
  await client.register('shop.Money', { schemaType: 'AVRO', schema: JSON.stringify(MONEY_AVRO) }, false);
  await client.register(
    'payments-value',
    { schemaType: 'AVRO', schema: JSON.stringify(PAYMENT_AVRO), references: [{ name: 'shop.Money', subject: 'shop.Money', version: 1 }] },
    false,
  );
  const ser = new AvroSerializer(client, SerdeType.VALUE, { useLatestVersion: true });
  const values = [
    await ser.serialize('payments', { paymentId: 'p-1', amount: { cents: 1250, currency: 'EUR' }, refund: null }),
    await ser.serialize('payments', { paymentId: 'p-2', amount: { cents: 5, currency: 'USD' }, refund: { cents: 5, currency: 'USD' } }),
  ];
  const mapped = await decodeAll(client, 'payments', values, '/paymentId');
  t.deepEqual(
    mapped.map((m) => (m.ok ? [m.item.transactionId, JSON.parse(m.item.payload.toString()) as unknown] : m.reason)),
    [
      ['p-1', { paymentId: 'p-1', amount: { cents: 1250, currency: 'EUR' }, refund: null }],
      ['p-2', { paymentId: 'p-2', amount: { cents: 5, currency: 'USD' }, refund: { cents: 5, currency: 'USD' } }],
    ],
  );
});

// payment.proto imports money.proto, which imports currency.proto: a reference two levels deep.
function paymentProto() {
  const opt = FieldDescriptorProto_Label.OPTIONAL;
  const { STRING, INT64, MESSAGE } = FieldDescriptorProto_Type;
  const currency = create(FileDescriptorProtoSchema, {
    name: 'currency.proto',
    package: 'shop',
    syntax: 'proto3',
    messageType: [{ name: 'Currency', field: [{ name: 'code', number: 1, type: STRING, label: opt, jsonName: 'code' }] }],
  });
  const money = create(FileDescriptorProtoSchema, {
    name: 'money.proto',
    package: 'shop',
    syntax: 'proto3',
    dependency: ['currency.proto'],
    messageType: [
      {
        name: 'Money',
        field: [
          { name: 'cents', number: 1, type: INT64, label: opt, jsonName: 'cents' },
          { name: 'currency', number: 2, type: MESSAGE, typeName: '.shop.Currency', label: opt, jsonName: 'currency' },
        ],
      },
    ],
  });
  const payment = create(FileDescriptorProtoSchema, {
    name: 'payment.proto',
    package: 'shop',
    syntax: 'proto3',
    dependency: ['money.proto'],
    messageType: [
      {
        name: 'Payment',
        field: [
          { name: 'payment_id', number: 1, type: STRING, label: opt, jsonName: 'paymentId' },
          { name: 'amount', number: 2, type: MESSAGE, typeName: '.shop.Money', label: opt, jsonName: 'amount' },
        ],
      },
    ],
  });
  const byName = new Map([
    ['money.proto', money],
    ['currency.proto', currency],
  ]);
  return createFileRegistry(payment, (name) => byName.get(name)).getFile('payment.proto')!;
}

test('Protobuf importing a file that imports another: the whole graph is fetched as descriptors and the value decodes', async (t) => {
  const client = asRealRegistry(new MockClient({ baseURLs: ['mock://'] }));
  const file = paymentProto();
  const ser = new ProtobufSerializer(client, SerdeType.VALUE, { autoRegisterSchemas: true, registry: createMutableRegistry(file) });
  const desc = file.messages[0]!;
  const values = [
    await ser.serialize('pay', create(desc, { paymentId: 'q-1', amount: { cents: 99n, currency: { code: 'EUR' } } })),
    await ser.serialize('pay', create(desc, { paymentId: 'q-2' })),
  ];
  const mapped = await decodeAll(client, 'pay', values, '/payment_id');
  t.deepEqual(
    mapped.map((m) => (m.ok ? [m.item.transactionId, JSON.parse(m.item.payload.toString()) as unknown] : m.reason)),
    [
      ['q-1', { payment_id: 'q-1', amount: { cents: '99', currency: { code: 'EUR' } } }],
      ['q-2', { payment_id: 'q-2' }],
    ],
  );
});
