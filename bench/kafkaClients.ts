/**
 * Which Kafka client for the ingress on Node 24 (issue 39, "a Kafka client
 * chosen on Node 24"): kafkajs (what src/ingress uses) against
 * @platformatic/kafka, group consume-only, no database. Not part of
 * `make bench`:
 *
 *   scripts/with-deps.sh --kafka --profile run -- node dist/bench/kafkaClients.js [--records N] [--reps N] [--codec lz4|gzip]
 *
 * Per variant (an uncompressed topic, then one compressed with --codec,
 * default lz4) one topic of --records records (default 1 M) is filled as the
 * kafka-e2e suite fills its own (8 partitions, 32 keys, a transactionId
 * header, ~100-byte JSON values; lib/kafka.ts produceE2eTopic). Each
 * repetition reads the whole topic once with each client, alternating which
 * goes first (A B, B A, ...), each run in a fresh consumer group from the
 * earliest offset, committing explicitly after every fetched batch (in
 * chunks of QUEEN_INGRESS_COMMIT_EVERY records per partition, as the
 * ingress). A run is timed from the moment its consumer has joined the group
 * to the moment the commit covering the topic's last record has resolved;
 * its CPU is this process's (process.cpuUsage(), user + system) over the
 * same interval, reported as CPU seconds per million records. One discarded
 * warm-up run per client first (JIT, connection pools), so neither client's
 * first measured run is its cold one.
 *
 * Prints a markdown table; writes bench/results/kafka-clients/kafka-clients-<time>.json.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Consumer, MessagesStreamFallbackModes, MessagesStreamModes, type Message, type MessagesStream } from '@platformatic/kafka';
import { CompressionTypes } from 'kafkajs';
import { registerCodecs } from '../src/ingress/codecs.js';
import { startConsumeOnly } from './baselines/kafkaSink.js';
import { settle } from './lib/gc.js';
import {
  createTopic,
  deleteTopicsAndGroups,
  endOffsets,
  groupProgress,
  kafkaClient,
  produceE2eTopic,
  uniqueName,
  withAdmin,
} from './lib/kafka.js';
import { machineInfo } from './lib/machine.js';
import { RESULTS_DIR } from './lib/report.js';
import { CONSUMER_SETTINGS } from './lib/stack.js';
import { fmt, median } from './lib/stats.js';

type Client = 'kafkajs' | 'platformatic';
const CLIENTS: readonly Client[] = ['kafkajs', 'platformatic'];

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: { records: { type: 'string' }, reps: { type: 'string' }, codec: { type: 'string' } },
});
const RECORDS = Number(values.records ?? 1_000_000);
const REPS = Number(values.reps ?? 3);
const CODEC = values.codec ?? 'lz4';
if (!(Number.isInteger(RECORDS) && RECORDS > 0)) throw new Error('--records must be a positive integer');
if (!(Number.isInteger(REPS) && REPS > 0)) throw new Error('--reps must be a positive integer');
if (CODEC !== 'lz4' && CODEC !== 'gzip') throw new Error('--codec must be lz4 or gzip');
const brokers = (process.env.KAFKA_BROKERS ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
if (brokers.length === 0) throw new Error('KAFKA_BROKERS is not set (run under scripts/with-deps.sh --kafka)');

const TOPIC_SHAPE = { topicPartitions: 8, keys: 32, payloadBytes: 100 } as const;
const WARMUP_RECORDS = Math.min(RECORDS, 200_000);
// A run that has not seen every record by then is reported as a failure, never as a slow number.
const RUN_TIMEOUT_MS = Math.max(120_000, RECORDS / 10);

/**
 * The platformatic consumer's settings, matched to what the kafkajs baseline
 * runs with (bench/lib/stack.ts CONSUMER_SETTINGS: the ingress's defaults)
 * so that the two fetch the same amounts per request:
 */
const PLATFORMATIC_SETTINGS = {
  // The group's session and heartbeat, as the baseline's.
  sessionTimeout: CONSUMER_SETTINGS.sessionTimeoutMs,
  heartbeatInterval: CONSUMER_SETTINGS.heartbeatIntervalMs,
  // Offsets are committed only by the loop (message.commit()), as the ingress commits only what PostgreSQL answered.
  autocommit: false,
  // The broker answers a fetch once it holds minBytes, else after maxWaitTime ms, as for the kafkajs baseline (the ingress's defaults).
  minBytes: CONSUMER_SETTINGS.minBytes,
  maxWaitTime: CONSUMER_SETTINGS.maxWaitTimeInMs,
  // Per partition per fetch, the ingress's maxBytesPerPartition (1 MiB). Left unset, platformatic asks for maxBytes per partition.
  maxBytesPerPartition: CONSUMER_SETTINGS.maxBytesPerPartition,
  // Per fetch response, kafkajs's default maxBytes (10 MiB; platformatic's own default is 50 MiB).
  maxBytes: 10 * 1024 * 1024,
  // Left at platformatic's default (1024 messages): the stream keeps fetching while fewer
  // are buffered unread. Its README sets it that high for throughput.
  highWaterMark: 1024,
} as const;

interface Run {
  client: Client;
  rep: number;
  group: string;
  /** From connect to joined (consume() / run() resolved). */
  joinMs: number;
  seconds: number;
  records: number;
  recordsPerS: number;
  cpuUserMs: number;
  cpuSystemMs: number;
  /** (user + system) CPU seconds per million records (= CPU µs per record). */
  cpuSecondsPerMillion: number;
}

/** Polls `done` every 5 ms (a few timers per run: noise next to the clients' own CPU). */
async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + RUN_TIMEOUT_MS;
  for (;;) {
    if (done()) return;
    if (performance.now() > deadline) throw new Error(`${what}: not done within ${RUN_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

interface Measured {
  joinMs: number;
  seconds: number;
  records: number;
  cpu: NodeJS.CpuUsage;
}

/** kafkajs, exactly the kafka-e2e suite's consume-only baseline (eachBatch, commitOffsets per chunk). */
async function runKafkajs(topic: string, group: string, target: number): Promise<Measured> {
  const tj = performance.now();
  const s = await startConsumeOnly({ brokers, group, topic, settings: CONSUMER_SETTINGS });
  try {
    // Joined: run() has resolved (kafkajs joins and syncs the group before it returns).
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const joinMs = t0 - tj;
    // records() counts a chunk once its commit has resolved.
    await until(() => s.records() >= target, `kafkajs on ${topic}`);
    const seconds = (performance.now() - t0) / 1000;
    return { joinMs, seconds, records: s.records(), cpu: process.cpuUsage(c0) };
  } finally {
    await s.stop();
  }
}

/**
 * @platformatic/kafka: a consume() stream read in batches, each batch being
 * whatever the stream holds when the loop asks (what its fetches delivered
 * meanwhile). Per batch and partition, message.commit() on the last record
 * of every COMMIT_EVERY-record chunk and on the partition's last record; the
 * loop awaits the batch's commits before it reads on, as the kafkajs loop
 * awaits commitOffsets. (message.commit() is the library's manual-commit path:
 * it merges offsets per partition and keeps one OffsetCommit request in
 * flight, so a batch's commits travel as one or two requests.) The stream
 * keeps fetching meanwhile, up to highWaterMark unread messages.
 */
async function runPlatformatic(topic: string, group: string, target: number): Promise<Measured> {
  const tj = performance.now();
  const consumer = new Consumer({
    clientId: 'queen-bench-platformatic',
    bootstrapBrokers: brokers,
    groupId: group,
    ...PLATFORMATIC_SETTINGS,
  });
  let stream: MessagesStream<Buffer, Buffer, Buffer, Buffer> | undefined;
  try {
    // consume() joins and syncs the group before it resolves. mode COMMITTED resumes from the
    // group's committed offsets (the default, LATEST, ignores them), EARLIEST when it has none.
    stream = await consumer.consume({
      topics: [topic],
      mode: MessagesStreamModes.COMMITTED,
      fallbackMode: MessagesStreamFallbackModes.EARLIEST,
    });
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const joinMs = t0 - tj;
    const s = stream;
    let failure: Error | undefined;
    let wake: (() => void) | undefined;
    const poke = (): void => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    // A 'readable' listener puts the stream in paused mode (readableFlowing false), in which it fetches on read().
    s.on('readable', poke);
    s.on('error', (err: Error) => {
      failure = err;
      poke();
    });
    s.on('end', poke);
    const deadline = performance.now() + RUN_TIMEOUT_MS;
    let seen = 0;
    while (seen < target) {
      if (failure) throw failure;
      const batch: Message[] = [];
      for (let m = s.read() as Message | null; m !== null; m = s.read() as Message | null) batch.push(m);
      if (batch.length === 0) {
        if (s.readableEnded || s.destroyed) throw new Error(`platformatic stream on ${topic} ended after ${seen} records`);
        if (performance.now() > deadline) throw new Error(`platformatic on ${topic}: not done within ${RUN_TIMEOUT_MS} ms`);
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(poke, 250).unref(); // re-checks the deadline should the stream stall
        });
        continue;
      }
      const inChunk = new Map<number, number>();
      const last = new Map<number, Message>();
      const commits: Promise<void>[] = [];
      for (const m of batch) {
        const n = (inChunk.get(m.partition) ?? 0) + 1;
        if (n === CONSUMER_SETTINGS.commitEvery) {
          commits.push(m.commit() as Promise<void>);
          inChunk.set(m.partition, 0);
          last.delete(m.partition);
        } else {
          inChunk.set(m.partition, n);
          last.set(m.partition, m);
        }
      }
      for (const m of last.values()) commits.push(m.commit() as Promise<void>);
      await Promise.all(commits);
      seen += batch.length;
    }
    const seconds = (performance.now() - t0) / 1000;
    return { joinMs, seconds, records: seen, cpu: process.cpuUsage(c0) };
  } finally {
    await stream?.close().catch(() => undefined);
    await consumer.close();
  }
}

const kafka = kafkaClient(brokers, 'queen-bench-kafka-clients');
const topics: string[] = [];
const groups: string[] = [];

/** One measured run: a fresh group, then a check that the group's commits reached every partition's end. */
async function measure(client: Client, topic: string, rep: number, ends: Map<number, number>): Promise<Run> {
  const group = uniqueName(`bench-kc-${client}`);
  groups.push(group);
  await settle();
  const m = await (client === 'kafkajs' ? runKafkajs : runPlatformatic)(topic, group, RECORDS);
  const progress = await withAdmin(kafka, (a) => groupProgress(a, group, topic, ends));
  if (!progress.done) throw new Error(`${client} rep ${rep}: group ${group} committed ${progress.committed} of ${RECORDS} records`);
  const cpuMs = (m.cpu.user + m.cpu.system) / 1000;
  return {
    client,
    rep,
    group,
    joinMs: m.joinMs,
    seconds: m.seconds,
    records: m.records,
    recordsPerS: RECORDS / m.seconds,
    cpuUserMs: m.cpu.user / 1000,
    cpuSystemMs: m.cpu.system / 1000,
    cpuSecondsPerMillion: cpuMs / 1000 / (RECORDS / 1e6),
  };
}

function packageVersion(file: string): string {
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

interface Variant {
  name: string;
  compression: CompressionTypes | undefined;
  topic: string;
  produceRecordsPerS: number;
  runs: Run[];
}

const started = new Date();
// The service's codec table (lz4, zstd, snappy for kafkajs), registered as KafkaIngress does before it consumes.
registerCodecs();
const variants: Variant[] = [];
try {
  const specs: { name: string; compression: CompressionTypes | undefined }[] = [
    { name: 'uncompressed', compression: undefined },
    { name: CODEC, compression: CODEC === 'lz4' ? CompressionTypes.LZ4 : CompressionTypes.GZIP },
  ];
  for (const spec of specs) {
    const topic = uniqueName(`bench-kc-${spec.name}`);
    topics.push(topic);
    process.stderr.write(`${spec.name}: producing ${fmt(RECORDS)} records to ${topic}\n`);
    await createTopic(kafka, topic, TOPIC_SHAPE.topicPartitions);
    const produceRecordsPerS = await produceE2eTopic(kafka, topic, { records: RECORDS, ...TOPIC_SHAPE, compression: spec.compression });
    const ends = await withAdmin(kafka, (a) => endOffsets(a, topic));
    const produced = [...ends.values()].reduce((a, b) => a + b, 0);
    if (produced !== RECORDS) throw new Error(`topic ${topic} holds ${produced} records, expected ${RECORDS}`);
    if (variants.length === 0) {
      for (const client of CLIENTS) {
        const group = uniqueName(`bench-kc-warm-${client}`);
        groups.push(group);
        process.stderr.write(`warm-up: ${client} reads ${fmt(WARMUP_RECORDS)} records (not measured)\n`);
        await (client === 'kafkajs' ? runKafkajs : runPlatformatic)(topic, group, WARMUP_RECORDS);
      }
    }
    const runs: Run[] = [];
    for (let rep = 1; rep <= REPS; rep++) {
      for (const client of rep % 2 === 1 ? CLIENTS : [...CLIENTS].reverse()) {
        const r = await measure(client, topic, rep, ends);
        runs.push(r);
        process.stderr.write(
          `${spec.name} rep ${rep}/${REPS} ${client}: ${fmt(r.recordsPerS)} rec/s, ${r.cpuSecondsPerMillion.toFixed(2)} CPU s per M records (joined in ${r.joinMs.toFixed(0)} ms)\n`,
        );
      }
    }
    variants.push({ name: spec.name, compression: spec.compression, topic, produceRecordsPerS, runs });
  }
} finally {
  await deleteTopicsAndGroups(kafka, topics, groups);
}

const of = (v: Variant, c: Client): Run[] => v.runs.filter((r) => r.client === c);
const list = (xs: number[], f: (x: number) => string): string => xs.map(f).join(', ');
const lines = [
  `kafkajs ${packageVersion(createRequire(import.meta.url).resolve('kafkajs/package.json'))} vs @platformatic/kafka ${packageVersion(join(fileURLToPath(import.meta.resolve('@platformatic/kafka')), '../../package.json'))}, Node ${process.version}: group consume-only, ${fmt(RECORDS)} records x ${REPS} reps, medians (each rep in brackets)`,
  '',
  '| topic | client | rec/s | CPU s per M records | join ms |',
  '| --- | --- | --- | --- | --- |',
];
for (const v of variants) {
  for (const c of CLIENTS) {
    const rs = of(v, c);
    const rate = rs.map((r) => r.recordsPerS);
    const cpu = rs.map((r) => r.cpuSecondsPerMillion);
    lines.push(
      `| ${v.name} | ${c} | ${fmt(median(rate))} (${list(rate, (x) => fmt(x))}) | ${median(cpu).toFixed(2)} (${list(cpu, (x) => x.toFixed(2))}) | ${median(rs.map((r) => r.joinMs)).toFixed(0)} |`,
    );
  }
  // Per rep: the two runs of one repetition ran back to back, so their ratio cancels slow drifts of the machine.
  const pairs = (f: (r: Run) => number): number[] =>
    Array.from({ length: REPS }, (_, i) => f(of(v, 'platformatic')[i]!) / f(of(v, 'kafkajs')[i]!));
  const rp = pairs((r) => r.recordsPerS);
  const cp = pairs((r) => r.cpuSecondsPerMillion);
  lines.push(
    `| ${v.name} | platformatic / kafkajs | ${median(rp).toFixed(2)}x (${list(rp, (x) => x.toFixed(2))}) | ${median(cp).toFixed(2)}x (${list(cp, (x) => x.toFixed(2))}) | |`,
  );
}
const table = lines.join('\n');

const dir = join(RESULTS_DIR, 'kafka-clients');
mkdirSync(dir, { recursive: true });
const file = join(dir, `kafka-clients-${started.toISOString().replace(/[:.]/g, '-')}.json`);
const doc = {
  suite: 'kafka-clients',
  startedAt: started.toISOString(),
  durationSeconds: (Date.now() - started.getTime()) / 1000,
  machine: await machineInfo(process.env.DATABASE_URL ?? '', brokers),
  params: { records: RECORDS, reps: REPS, codec: CODEC, warmupRecords: WARMUP_RECORDS, ...TOPIC_SHAPE },
  settings: { kafkajs: CONSUMER_SETTINGS, platformatic: PLATFORMATIC_SETTINGS },
  variants: variants.map((v) => ({ name: v.name, topic: v.topic, produceRecordsPerS: v.produceRecordsPerS, runs: v.runs })),
  table,
};
writeFileSync(file, JSON.stringify(doc, null, 2) + '\n');
process.stdout.write(`${table}\n\nresults: ${file}\n`);
// kafkajs and platformatic leave no handles behind once closed; the exit is explicit so a stray timer cannot hold the run.
process.exit(0);
