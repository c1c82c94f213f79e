import { Kafka, logLevel, type Consumer, type EachBatchPayload, type KafkaMessage } from 'kafkajs';
import type pg from 'pg';

/**
 * The two kafkajs baselines of the Kafka -> PostgreSQL benchmark, consuming
 * the same topic with the same consumer settings and commit policy as the
 * queen ingest (bench/lib/stack.ts CONSUMER_SETTINGS): eachBatch, records in
 * chunks of `commitEvery`, resolveOffset + commitOffsets after each chunk,
 * `partitionsConsumedConcurrently` batches at once, a fresh group each run.
 *
 * - sink: what a user would write without queen. One row per record in a
 *   table with a unique index on (partition, transactionId), each chunk one
 *   INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING. partition is the
 *   record key and transactionId the `transactionId` header, exactly as the
 *   ingest maps them (src/ingress/recordMapping.ts). Payloads travel as one
 *   concatenated bytea cut in SQL (the same wire trick the engine uses), so
 *   the sink is not slowed by hex-encoded bytea arrays.
 * - consume-only: the same loop with no database at all: the ceiling any
 *   kafkajs-based ingest can reach on this machine.
 */

export const SINK_DDL = (table: string): string => `
CREATE SCHEMA IF NOT EXISTS bench_sink;
CREATE TABLE bench_sink.${table} (
    partition      text        NOT NULL,
    transaction_id text        NOT NULL,
    payload        bytea       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ${table}_partition_txn UNIQUE (partition, transaction_id)
)`;

const SINK_INSERT = (table: string): string => `
INSERT INTO bench_sink.${table} (partition, transaction_id, payload)
SELECT u.p, u.t, substring($3::bytea FROM (sum(u.len) OVER (ORDER BY u.i) - u.len + 1)::integer FOR u.len)
FROM unnest($1::text[], $2::text[], $4::integer[]) WITH ORDINALITY AS u (p, t, len, i)
ON CONFLICT (partition, transaction_id) DO NOTHING`;

export interface ConsumerSettings {
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  partitionsConsumedConcurrently: number;
  maxBytesPerPartition: number;
  /** The broker answers a fetch once it holds this many bytes, or after maxWaitTimeInMs. */
  minBytes: number;
  maxWaitTimeInMs: number;
  commitEvery: number;
}

/** The shape of KafkaIngress's CommittedChunk the latency measurement reads. */
export interface CommittedRecords {
  topic: string;
  partition: number;
  records: { offset: string; timestamp: string }[];
  committed: boolean;
  committedAtMs: number;
  /**
   * Stage times, Date.now() each, as KafkaIngress reports them: its batch
   * reached eachBatch, its work started (after the batch's earlier chunks
   * were done and committed: the loop's "lane"), its work done (the INSERT
   * for the sink; nothing for consume-only). So the suite can show where a
   * baseline's records waited next to the ingest's: consume-only's "fetch"
   * stage is what any kafkajs consumer waits at that rate, with this
   * producer and broker, before it can do anything.
   */
  fetchedAtMs: number;
  startedAtMs: number;
  verdictsAtMs: number;
}

export interface RunningConsumer {
  consumer: Consumer;
  records(): number;
  stop(): Promise<void>;
}

function header(m: KafkaMessage, name: string): string | undefined {
  const v = m.headers?.[name];
  const one = Array.isArray(v) ? v[0] : v;
  return one === undefined ? undefined : one.toString();
}

async function startLoop(
  brokers: string[],
  group: string,
  topic: string,
  s: ConsumerSettings,
  onChunk: (topic: string, partition: number, messages: KafkaMessage[]) => Promise<void>,
  onCommitted?: (chunk: CommittedRecords) => void,
): Promise<RunningConsumer> {
  const kafka = new Kafka({
    clientId: 'queen-bench-baseline',
    brokers,
    logLevel: logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 5_000 },
  });
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: s.sessionTimeoutMs,
    heartbeatInterval: s.heartbeatIntervalMs,
    maxBytesPerPartition: s.maxBytesPerPartition,
    minBytes: s.minBytes,
    maxWaitTimeInMs: s.maxWaitTimeInMs,
    retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 5_000 },
  });
  let count = 0;
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: s.partitionsConsumedConcurrently,
    // eslint-disable-next-line @typescript-eslint/unbound-method -- kafkajs builds these payload functions as closures; none uses this
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload) => {
      const fetchedAtMs = Date.now();
      for (let i = 0; i < batch.messages.length; i += s.commitEvery) {
        if (!isRunning() || isStale()) return;
        const chunk = batch.messages.slice(i, i + s.commitEvery);
        const startedAtMs = Date.now();
        await onChunk(batch.topic, batch.partition, chunk);
        const verdictsAtMs = Date.now();
        const last = chunk[chunk.length - 1]!.offset;
        resolveOffset(last);
        await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() }]);
        // The same observer contract as KafkaIngress's onCommitted.
        onCommitted?.({
          topic: batch.topic,
          partition: batch.partition,
          records: chunk.map((m) => ({ offset: m.offset, timestamp: m.timestamp })),
          committed: true,
          committedAtMs: Date.now(),
          fetchedAtMs,
          startedAtMs,
          verdictsAtMs,
        });
        count += chunk.length;
        await heartbeat();
      }
    },
  });
  return {
    consumer,
    records: () => count,
    async stop() {
      await consumer.disconnect();
    },
  };
}

/** The ON CONFLICT sink; creates bench_sink.<table> first unless `tableExists` (a table pre-loaded with SINK_DDL's shape). */
export async function startKafkaSink(opts: {
  brokers: string[];
  group: string;
  topic: string;
  pool: pg.Pool;
  table: string;
  settings: ConsumerSettings;
  onCommitted?: (chunk: CommittedRecords) => void;
  tableExists?: boolean;
}): Promise<RunningConsumer> {
  if (!/^[a-z_][a-z0-9_]*$/.test(opts.table)) throw new Error(`bad sink table name ${opts.table}`);
  if (!opts.tableExists) await opts.pool.query(SINK_DDL(opts.table));
  const text = SINK_INSERT(opts.table);
  const name = `bench_sink_${opts.table}`;
  return startLoop(
    opts.brokers,
    opts.group,
    opts.topic,
    opts.settings,
    async (_topic, _partition, messages) => {
      const parts: string[] = [];
      const txns: string[] = [];
      const lens: number[] = [];
      const payloads: Buffer[] = [];
      for (const m of messages) {
        if (m.value === null) continue;
        parts.push(m.key === null ? 'Default' : m.key.toString('utf8'));
        txns.push(header(m, 'transactionId') ?? `${_topic}/${_partition}/${m.offset}`);
        lens.push(m.value.length);
        payloads.push(m.value);
      }
      if (parts.length > 0) await opts.pool.query({ name, text, values: [parts, txns, Buffer.concat(payloads), lens] });
    },
    opts.onCommitted,
  );
}

/** kafkajs alone: resolve and commit each chunk, nothing else. */
export async function startConsumeOnly(opts: {
  brokers: string[];
  group: string;
  topic: string;
  settings: ConsumerSettings;
  onCommitted?: (chunk: CommittedRecords) => void;
}): Promise<RunningConsumer> {
  return startLoop(opts.brokers, opts.group, opts.topic, opts.settings, async () => undefined, opts.onCommitted);
}
