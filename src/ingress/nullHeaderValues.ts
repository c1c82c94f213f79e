import { createRequire } from 'node:module';

/**
 * Lets kafkajs 2.2.4's producer write a header whose value is null.
 *
 * Kafka's record format allows a null header value (length -1), and kafkajs
 * decodes one as `null`. Its record encoder, though, measures every header
 * value with Buffer.byteLength before it checks for null, so producing one
 * throws `The "string" argument must be of type string ... Received null`
 * (tulios/kafkajs issue #1789; the fix, PR #1786, is not released, and 2.2.4
 * is the last release). The dead-letter producer must copy a record's
 * headers as they were, null included, or the dead letter can never be
 * written and the record's partition stalls.
 *
 * So the record encoder module's export is wrapped: a record with a null
 * header value is encoded here (the record v2 layout of Kafka's protocol,
 * written with kafkajs's own Encoder); every other record still goes to
 * kafkajs's encoder untouched. The produce request modules hold the encoder
 * they loaded, and kafkajs loads them lazily per request, so they are dropped
 * from the module cache and load again with the wrapper, whatever was
 * loaded before this ran. Idempotent; test/integration/ingress-dead-letters
 * round-trips a null header value through a real broker.
 */

interface KafkaJsEncoder {
  writeInt8(v: number): KafkaJsEncoder;
  writeVarInt(v: number): KafkaJsEncoder;
  writeVarLong(v: unknown): KafkaJsEncoder;
  writeVarIntBytes(v: Buffer | string | null | undefined): KafkaJsEncoder;
  writeVarIntString(v: string): KafkaJsEncoder;
  writeEncoder(v: KafkaJsEncoder): KafkaJsEncoder;
  size(): number;
}

type HeaderInput = Record<string, Buffer | string | null | (Buffer | string | null)[] | undefined>;

interface RecordInput {
  offsetDelta?: number;
  timestampDelta?: unknown;
  key: Buffer | string | null | undefined;
  value: Buffer | string | null | undefined;
  headers?: HeaderInput;
}

type RecordEncoder = ((r: RecordInput) => KafkaJsEncoder) & { allowsNullHeaderValues?: true };

const require = createRequire(import.meta.url);
let applied = false;

export function allowNullHeaderValues(): void {
  if (applied) return;
  const recordPath = require.resolve('kafkajs/src/protocol/recordBatch/record/v0/index.js');
  const Encoder = require('kafkajs/src/protocol/encoder.js') as new () => KafkaJsEncoder;
  const original = require(recordPath) as RecordEncoder;
  const cached = require.cache[recordPath];
  if (!cached) throw new Error('kafkajs record encoder is not in the module cache after loading it');
  if (original.allowsNullHeaderValues) {
    applied = true;
    return;
  }

  const wrapped: RecordEncoder = (r) => {
    const pairs = headerPairs(r.headers ?? {});
    if (!pairs.some((p) => p.value === null)) return original(r);
    const body = new Encoder()
      .writeInt8(0) // attributes: none are defined for records
      .writeVarLong(r.timestampDelta ?? 0)
      .writeVarInt(r.offsetDelta ?? 0)
      .writeVarIntBytes(r.key)
      .writeVarIntBytes(r.value)
      .writeVarInt(pairs.length);
    // writeVarIntBytes(null) writes length -1: Kafka's null.
    for (const p of pairs) body.writeVarIntString(p.key).writeVarIntBytes(p.value);
    return new Encoder().writeVarInt(body.size()).writeEncoder(body);
  };
  wrapped.allowsNullHeaderValues = true;
  cached.exports = wrapped;

  // Produce requests captured the encoder when they loaded; they load again (lazily, per request) with the wrapper.
  const producePrefix = require.resolve('kafkajs/src/protocol/requests/produce/index.js').replace(/index\.js$/, '');
  for (const path of Object.keys(require.cache)) {
    if (path.startsWith(producePrefix) && /[/\\]v\d+[/\\]request\.js$/.test(path)) Reflect.deleteProperty(require.cache, path);
  }
  applied = true;
}

function headerPairs(headers: HeaderInput): { key: string; value: Buffer | string | null }[] {
  const out: { key: string; value: Buffer | string | null }[] = [];
  for (const [key, v] of Object.entries(headers)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const one of v) out.push({ key, value: one });
    else out.push({ key, value: v });
  }
  return out;
}
