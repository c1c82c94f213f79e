import { randomBytes } from 'node:crypto';
import { Kafka, logLevel, type Message } from 'kafkajs';
import type pg from 'pg';
import { unpackSegment } from '../../src/engine/frames.js';
import { waitFor } from './leaks.js';

/** KAFKA_BROKERS is set by scripts/with-deps.sh (or by the user). */
export function brokers(): string[] {
  const b = process.env.KAFKA_BROKERS;
  if (!b) throw new Error('KAFKA_BROKERS is not set: run tests through `make test` (it starts Kafka)');
  return b.split(',');
}

export function kafkaClient(): Kafka {
  return new Kafka({ clientId: 'queen-test', brokers: brokers(), logLevel: logLevel.NOTHING });
}

/** A topic (and group) name no other test file uses. */
export function uniqueName(label: string): string {
  return `${label}-${randomBytes(4).toString('hex')}`;
}

/**
 * Creates a topic and waits until every partition has a leader. A broker that
 * has just started may answer with retriable errors meanwhile; those are
 * polled through, anything else fails the test.
 */
export async function createTopic(kafka: Kafka, topic: string, partitions: number): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  const retriable = (err: unknown) => (err as { retriable?: boolean }).retriable === true;
  try {
    await waitFor(
      `topic ${topic} created`,
      async () => {
        try {
          await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: false });
          return true;
        } catch (err) {
          if (retriable(err)) return false;
          throw err;
        }
      },
      60_000,
      100,
    );
    await waitFor(
      `leaders for ${topic}`,
      async () => {
        try {
          const md = await admin.fetchTopicMetadata({ topics: [topic] });
          const parts = md.topics[0]?.partitions ?? [];
          return parts.length === partitions && parts.every((p) => p.leader >= 0);
        } catch (err) {
          if (retriable(err)) return false;
          throw err;
        }
      },
      60_000,
      100,
    );
  } finally {
    await admin.disconnect();
  }
}

/**
 * Produces in chunks with acks=all; per-key order is the order given. The
 * producer is idempotent: a plain one may append a record twice when it
 * retries under load, and the tests count records.
 */
export async function produce(kafka: Kafka, topic: string, messages: Message[], chunk = 2000): Promise<void> {
  const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    for (let i = 0; i < messages.length; i += chunk) {
      await producer.send({ topic, acks: -1, messages: messages.slice(i, i + chunk) });
    }
  } finally {
    await producer.disconnect();
  }
}

/**
 * Kafka admin errors that say "ask again later", not "this is wrong": a group
 * coordinator not found (the offsets partition is loading or moving; seen
 * once in CI on a loaded machine, after kafkajs's own retries), or any error
 * kafkajs marks retriable.
 */
function transientAdminError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'KafkaJSGroupCoordinatorNotFound' || err.name === 'KafkaJSNumberOfRetriesExceeded') return true;
  return (err as { retriable?: unknown }).retriable === true;
}

/** Runs an admin call, asking again on a transient error for up to 60 s (then the last error throws). */
async function withAdmin<T>(kafka: Kafka, call: (admin: ReturnType<Kafka['admin']>) => Promise<T>): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const admin = kafka.admin();
    try {
      await admin.connect();
      return await call(admin);
    } catch (err) {
      if (!transientAdminError(err) || Date.now() > deadline) throw err;
    } finally {
      await admin.disconnect();
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Committed offset per partition for a group (-1 when none). */
/** How many members the consumer group has now (0: everyone left). */
export async function groupMemberCount(kafka: Kafka, group: string): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const { groups } = await admin.describeGroups([group]);
    return groups[0]!.members.length;
  } finally {
    await admin.disconnect();
  }
}

export async function committed(kafka: Kafka, group: string, topic: string): Promise<Map<number, number>> {
  return withAdmin(kafka, async (admin) => {
    const [t] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    return new Map((t?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  });
}

/** High watermark (next offset) per partition. */
export async function endOffsets(kafka: Kafka, topic: string): Promise<Map<number, number>> {
  return withAdmin(kafka, async (admin) => new Map((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, Number(p.high)])));
}

/** Records in the topic (sum of end offsets; no retention or compaction in tests). */
export async function recordCount(kafka: Kafka, topic: string): Promise<number> {
  let n = 0;
  for (const high of (await endOffsets(kafka, topic)).values()) n += high;
  return n;
}

/**
 * First verdict per Kafka record, from the ingress's onCommitted observer.
 * A redelivered record (a refused commit, a rebalance) is answered again, as
 * a duplicate; its first verdict is the one that counts.
 */
export class VerdictLog {
  private readonly first = new Map<string, string>();
  readonly observe = (c: { topic: string; partition: number; records: { offset: string; status: string }[] }) => {
    for (const r of c.records) {
      const k = `${c.partition}/${r.offset}`;
      if (!this.first.has(k)) this.first.set(k, r.status);
    }
  };
  count(status: string): number {
    let n = 0;
    for (const s of this.first.values()) if (s === status) n++;
    return n;
  }
  get records(): number {
    return this.first.size;
  }
}

/** True when the group's committed offsets reached the topic's end on every partition. */
export async function caughtUp(kafka: Kafka, group: string, topic: string): Promise<boolean> {
  const [c, e] = await Promise.all([committed(kafka, group, topic), endOffsets(kafka, topic)]);
  for (const [p, high] of e) if (high > 0 && (c.get(p) ?? -1) < high) return false;
  return true;
}

export interface StoredFrame {
  partition: string;
  offset: number;
  transactionId: string;
  payload: Buffer;
  /** The frame's Kafka origin section, undecoded (decodeOrigin); undefined when none was kept. */
  origin: Buffer | undefined;
}

/** Every frame stored for a queue, decoded from the segment blobs, in (partition, offset) order. */
export async function storedFrames(pool: pg.Pool, queue: string): Promise<StoredFrame[]> {
  const r = await pool.query(
    `SELECT lp.name, s.base_offset, s.blob
     FROM queen.log_segments s
     JOIN queen.log_partitions lp ON lp.id = s.partition_id
     JOIN queen.queues q ON q.id = lp.queue_id
     WHERE q.name = $1
     ORDER BY lp.name, s.base_offset`,
    [queue],
  );
  const out: StoredFrame[] = [];
  for (const row of r.rows) {
    unpackSegment(row.blob).forEach((f, i) =>
      out.push({
        partition: row.name,
        offset: Number(row.base_offset) + i,
        transactionId: f.transactionId,
        payload: f.payload,
        origin: f.origin,
      }),
    );
  }
  return out;
}
