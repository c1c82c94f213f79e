import { randomBytes } from 'node:crypto';
import { Kafka, logLevel, type Admin, type CompressionTypes, type Message } from 'kafkajs';
import { sleep } from './stats.js';
import { MessageFactory } from './synth.js';

/** Kafka helpers for the benchmarks (the tests' helpers live in test/; bench does not import test code). */

export function kafkaClient(brokers: string[], clientId = 'queen-bench'): Kafka {
  return new Kafka({ clientId, brokers, logLevel: logLevel.NOTHING });
}

export function uniqueName(label: string): string {
  return `${label}-${randomBytes(4).toString('hex')}`;
}

export async function withAdmin<T>(kafka: Kafka, fn: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

export async function createTopic(kafka: Kafka, topic: string, partitions: number): Promise<void> {
  await withAdmin(kafka, (a) =>
    a.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true }).then(() => undefined),
  );
}

/** Best effort: topics and groups a benchmark created. */
export async function deleteTopicsAndGroups(kafka: Kafka, topics: string[], groups: string[]): Promise<void> {
  await withAdmin(kafka, async (a) => {
    const existing = new Set(await a.listTopics());
    const t = topics.filter((x) => existing.has(x));
    if (t.length > 0) await a.deleteTopics({ topics: t, timeout: 10_000 }).catch(() => undefined);
    if (groups.length > 0) await a.deleteGroups(groups).catch(() => undefined);
  }).catch(() => undefined);
}

/**
 * Produces in chunks (acks=all), `inFlight` sends at once; per-key order within a chunk is kept.
 * `compression`: kafkajs compresses each partition's part of a chunk as one record batch (lz4,
 * zstd and snappy only once src/ingress/codecs.ts registerCodecs() has run; gzip is built in).
 */
export async function produceAll(
  kafka: Kafka,
  topic: string,
  messages: Message[],
  chunk = 5000,
  inFlight = 2,
  onProgress?: (done: number) => void,
  compression?: CompressionTypes,
): Promise<void> {
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  try {
    let next = 0;
    let done = 0;
    const worker = async (): Promise<void> => {
      while (next < messages.length) {
        const from = next;
        next += chunk;
        await producer.send({ topic, acks: -1, messages: messages.slice(from, from + chunk), ...(compression ? { compression } : {}) });
        done += Math.min(chunk, messages.length - from);
        onProgress?.(done);
      }
    };
    await Promise.all(Array.from({ length: inFlight }, worker));
  } finally {
    await producer.disconnect();
  }
}

/**
 * Fills the Kafka end-to-end benchmarks' throughput topic: `records` records
 * over `keys` keys (`key-NN`, the log partition), a `transactionId` header and
 * ~`payloadBytes` JSON values (lib/synth.ts), as the service's producers send
 * them. Returns records/s. Its own function so the records array dies with it:
 * kept alive in a caller's frame, its ~2 M old objects made every later major
 * GC of the process (which hosts the consumers being measured) mark them again.
 */
export async function produceE2eTopic(
  kafka: Kafka,
  topic: string,
  p: { records: number; keys: number; payloadBytes: number; compression?: CompressionTypes },
): Promise<number> {
  const f = new MessageFactory('e2e', p.payloadBytes);
  const messages: Message[] = Array.from({ length: p.records }, (_, i) => ({
    key: `key-${String(i % p.keys).padStart(2, '0')}`,
    value: f.payload(i % p.keys, i),
    headers: { transactionId: `e2e-${i}` },
  }));
  const tp = performance.now();
  await produceAll(kafka, topic, messages, 5000, 2, undefined, p.compression);
  return p.records / ((performance.now() - tp) / 1000);
}

/** High watermark (next offset) per partition. */
export async function endOffsets(admin: Admin, topic: string): Promise<Map<number, number>> {
  return new Map((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, Number(p.high)]));
}

/**
 * Polls the group's committed offsets until every partition reached `ends`;
 * resolves with the time (performance.now()) the caught-up state was seen.
 */
export async function waitCommitted(
  admin: Admin,
  group: string,
  topic: string,
  ends: Map<number, number>,
  timeoutMs: number,
  everyMs = 25,
): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const [t] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    const c = new Map((t?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
    let ok = true;
    for (const [p, high] of ends) if (high > 0 && (c.get(p) ?? -1) < high) ok = false;
    const now = performance.now();
    if (ok) return now;
    if (now > deadline) throw new Error(`group ${group} did not catch up on ${topic} within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

/** Committed offsets of the group summed (each capped at its partition's end), and whether every partition reached its end. */
export async function groupProgress(
  admin: Admin,
  group: string,
  topic: string,
  ends: Map<number, number>,
): Promise<{ committed: number; done: boolean }> {
  const [t] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  const c = new Map((t?.partitions ?? []).map((x) => [x.partition, Number(x.offset)]));
  let committed = 0;
  let done = true;
  for (const [part, high] of ends) {
    const o = Math.max(0, c.get(part) ?? 0);
    committed += Math.min(o, high);
    if (high > 0 && o < high) done = false;
  }
  return { committed, done };
}
