import { create, createFileRegistry, createMutableRegistry, type DescFile } from '@bufbuild/protobuf';
import { FieldDescriptorProto_Label, FieldDescriptorProto_Type, FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { AvroSerializer, JsonSerializer, ProtobufSerializer, SerdeType, type Client } from '@confluentinc/schemaregistry';

/**
 * Real Confluent-framed bytes, made by Confluent's own serializers
 * (@confluentinc/schemaregistry) against a registry client: the library's
 * MockClient in unit tests, a registry over HTTP in integration tests.
 */

/** An order as Avro: a string id, a long, bytes, a nullable string. */
export const ORDER_AVRO = {
  type: 'record',
  name: 'Order',
  namespace: 'shop',
  fields: [
    { name: 'orderId', type: 'string' },
    { name: 'customer', type: 'string' },
    { name: 'cents', type: 'long' },
    { name: 'note', type: ['null', 'string'], default: null },
    { name: 'tag', type: 'bytes' },
  ],
};

/** shop.proto, built as a descriptor (no protoc here): Order (seq int64 = 1, order_id = 2, customer = 3) and Refund (refund_id = 1). */
export function shopProto(): DescFile {
  const string = { type: FieldDescriptorProto_Type.STRING, label: FieldDescriptorProto_Label.OPTIONAL };
  const fdp = create(FileDescriptorProtoSchema, {
    name: 'shop.proto',
    package: 'shop',
    syntax: 'proto3',
    messageType: [
      {
        name: 'Order',
        field: [
          { name: 'seq', number: 1, type: FieldDescriptorProto_Type.INT64, label: FieldDescriptorProto_Label.OPTIONAL, jsonName: 'seq' },
          { name: 'order_id', number: 2, jsonName: 'orderId', ...string },
          { name: 'customer', number: 3, jsonName: 'customer', ...string },
        ],
      },
      { name: 'Refund', field: [{ name: 'refund_id', number: 1, jsonName: 'refundId', ...string }] },
    ],
  });
  return createFileRegistry(fdp, () => undefined).getFile('shop.proto')!;
}

export interface Framers {
  avro(topic: string, value: Record<string, unknown>): Promise<Buffer>;
  /** `message`: which top-level message of shop.proto (its index goes into the frame). */
  protobuf(topic: string, message: 'Order' | 'Refund', value: Record<string, unknown>): Promise<Buffer>;
  json(topic: string, value: Record<string, unknown>): Promise<Buffer>;
}

/** Serializers registering their schemas under TopicNameStrategy's `<topic>-value`, as a producer's do by default. */
export function framers(client: Client): Framers {
  const file = shopProto();
  const proto = new ProtobufSerializer(client, SerdeType.VALUE, { autoRegisterSchemas: true, registry: createMutableRegistry(file) });
  // A JSON Schema for the JSON serializer to register (it infers none).
  const orderJsonSchema = JSON.stringify({
    type: 'object',
    properties: { transactionId: { type: 'string' }, n: { type: 'integer' } },
    required: ['transactionId'],
  });
  return {
    async avro(topic, value) {
      // Registered first and used as the subject's latest (the serializer would otherwise infer one from the object).
      await client.register(`${topic}-value`, { schemaType: 'AVRO', schema: JSON.stringify(ORDER_AVRO) }, false);
      return new AvroSerializer(client, SerdeType.VALUE, { useLatestVersion: true }).serialize(topic, value);
    },
    async protobuf(topic, message, value) {
      const desc = file.messages.find((m) => m.name === message)!;
      return proto.serialize(topic, create(desc, value));
    },
    async json(topic, value) {
      await client.register(`${topic}-value`, { schemaType: 'JSON', schema: orderJsonSchema }, false);
      return new JsonSerializer(client, SerdeType.VALUE, { useLatestVersion: true }).serialize(topic, value);
    },
  };
}
