import { randomBytes } from 'node:crypto';
import type { Admin, Message } from 'kafkajs';
import type pg from 'pg';
import { HASH_BYTES, hashTransactionId } from '../../src/util/txnHash.js';
import {
  checkApplied,
  connectSettings,
  fetchConnect,
  startConnectSink,
  waitJoined,
  type ConnectHome,
  type ConnectSettings,
} from '../baselines/connectSink.js';
import { SINK_DDL, startKafkaSink } from '../baselines/kafkaSink.js';
import { BinaryCopyWriter } from '../lib/copy.js';
import { addCpu, cpuSince, cpuSnapshot, fmtShares, listenerPid, watchBroker, type CpuDelta } from '../lib/cpu.js';
import { checkpoint, createBenchDatabase, type BenchDatabase } from '../lib/db.js';
import { provisionQueueNamed } from '../lib/engine.js';
import { settle } from '../lib/gc.js';
import { createTopic, deleteTopicsAndGroups, endOffsets, groupProgress, kafkaClient, uniqueName, withAdmin } from '../lib/kafka.js';
import { histogramNames, parsePromText, promHistogram, promSum, type PromSample } from '../lib/promText.js';
import { cpuPerRecord, drainTimed, ServicePod, sizeOverride, workerRowsOnly } from '../lib/servicePod.js';
import { CONSUMER_SETTINGS, POOL_SIZE, startIngestStack } from '../lib/stack.js';
import { fmt, median, sleep } from '../lib/stats.js';
import { bulkLoad, MessageFactory, type PartitionCursor } from '../lib/synth.js';
import { target, type Info, type Suite, type SuiteContext, type SuiteResult, type Target } from '../lib/types.js';
import { rng } from '../lib/rng.js';

/**
 * Suite `kafka-dups`: Kafka -> PostgreSQL when duplicates really arrive
 * (issue 12). One topic shape (N records, 32 keys on 8 Kafka partitions,
 * ~290-byte JSON values in Kafka Connect's schema envelope, a `transactionId`
 * header and the same id in the value), three workloads:
 *
 *   dupfree  every record a new transactionId;
 *   dups10   10 % of records re-send an earlier transactionId of the same key
 *            (uniformly chosen: half from earlier in the topic, half, when
 *            history is stored, from the stored history);
 *   replay   the dupfree topic consumed again by a new group from earliest,
 *            after it was ingested: 100 % duplicates;
 *
 * each at 0 and at S messages already stored inside the dedup window (quick
 * 200k, full 5M), through consumers of the same topics into the same
 * PostgreSQL: the service (the real ingress and write pipeline,
 * bench/lib/stack.ts), Kafka Connect + Debezium's JDBC sink (upsert on
 * (key, transactionId)) tuned as its users run it, the kafkajs ON CONFLICT
 * sink, and, on the 10 % dups workload only, the same Connect sink with its
 * default configuration (an info row; baselines/connectSink.ts has both).
 *
 * Stored history is bulk-loaded once per size into a template database (the
 * engine's log_segments/log_txns by lib/synth.ts, with the real hashes the
 * dups10 topic's re-sends hit; the two sink tables with the same rows), and
 * each measurement gets a file copy of it, so every run starts from exactly S
 * stored messages. Every run is checked for exactness: each distinct
 * (key, transactionId) stored once, none lost, none twice.
 */

type System = 'service' | 'connect' | 'connectDefault' | 'sink';
type ConnectSystem = 'connect' | 'connectDefault';
type Workload = 'dupfree' | 'dups10' | 'replay';
const SYSTEMS: System[] = ['service', 'connect', 'connectDefault', 'sink'];
const WORKLOADS: Workload[] = ['dupfree', 'dups10', 'replay'];
const LABEL: Record<System, string> = {
  service: 'service',
  connect: 'tuned Connect JDBC sink',
  connectDefault: 'default-config Connect JDBC sink',
  sink: 'kafkajs ON CONFLICT sink',
};
const WLABEL: Record<Workload, string> = { dupfree: 'dup-free', dups10: '10% dups', replay: 'replay (100% dups)' };
/** The workloads each system runs: the default-config Connect sink only the one its info rows compare (10 % dups). */
const RUNS_OF: Record<System, Workload[]> = { service: WORKLOADS, connect: WORKLOADS, connectDefault: ['dups10'], sink: WORKLOADS };
const isConnect = (s: System): s is ConnectSystem => s === 'connect' || s === 'connectDefault';
/**
 * The real service as a pod (lib/servicePod.ts) with QUEEN_WORKERS=1 and =2,
 * on the 10 % dups workload at both sizes (docs/scaling.md, "To measure").
 */
type PodSystem = 'pod1' | 'pod2';
const POD_SYSTEMS: PodSystem[] = ['pod1', 'pod2'];
const POD_LABEL: Record<PodSystem, string> = { pod1: 'service pod, QUEEN_WORKERS=1', pod2: 'service pod, QUEEN_WORKERS=2' };
const isPod = (s: System | PodSystem): s is PodSystem => s === 'pod1' || s === 'pod2';

const QUEUE = 'kd';
/** Each Connect configuration writes its own table: a run must start from exactly the stored history, never another's rows. */
const CONNECT_TABLE: Record<ConnectSystem, string> = { connect: 'connect_t', connectDefault: 'connect_default_t' };
const SINK_TABLE = 'sink_t';
const NEW_TAG = 'kd';
const STORED_TAG = 'kh';

const ENVELOPE_HEAD =
  '{"schema":{"type":"struct","fields":[{"field":"key","type":"string"},{"field":"transactionId","type":"string"},{"field":"seq","type":"int64"},{"field":"body","type":"string"}]},"payload":';
const FILLER = randomBytes(1 << 15)
  .toString('base64')
  .replace(/[+/=]/g, 'x');

function keyName(k: number): string {
  return `key-${String(k).padStart(2, '0')}`;
}

/** A record value of exactly `bytes` bytes (when the fixed part fits): the schema envelope the Connect sink needs. */
function envelope(k: number, txn: string, seq: number, bytes: number): { value: Buffer; body: string } {
  const fixed = ENVELOPE_HEAD.length + JSON.stringify({ key: keyName(k), transactionId: txn, seq, body: '' }).length + 1;
  const n = Math.max(8, bytes - fixed);
  const at = (Math.imul(k + 1, 2654435761) + Math.imul(seq, 40503)) >>> 0;
  const body = FILLER.slice(at % (FILLER.length - n), (at % (FILLER.length - n)) + n);
  return { value: Buffer.from(`${ENVELOPE_HEAD}${JSON.stringify({ key: keyName(k), transactionId: txn, seq, body })}}`, 'utf8'), body };
}

interface TopicPlan {
  name: string;
  kind: 'dupfree' | 'dups10';
  /** Stored size the topic's re-sends may refer to (0: re-sends only point earlier in the topic). */
  storedSize: number;
  /** Per key: new (first-time) transactionIds, `kd-<k>-0 .. n-1`. */
  newPerKey: number[];
  resends: number;
  resendsOfStored: number;
}

interface Store {
  size: number;
  /** Per key: stored history messages (`kh-<pid>-0 .. n-1`, engine offsets 0 .. n-1). */
  storedPerKey: number[];
  /** Engine partition id per key (the same in every clone). */
  pidOf: number[];
  template: BenchDatabase;
  loadSeconds: number;
}

interface Check {
  lost: number;
  doubled: number;
  detail: string;
}

interface Run {
  rep: number;
  size: number;
  workload: Workload;
  system: System | PodSystem;
  recordsPerS: number;
  seconds: number;
  timedOut: boolean;
  check: Check | undefined;
  exact: boolean;
  cpu: CpuDelta;
  probes?: { run?: number; skipped?: number; hinted?: number; hist?: { name: string; count: number; p50: number; p99: number } };
}

/** Produces the topic (records generated on the fly, 2 sends in flight, acks=all). */
async function produceTopic(
  brokers: string[],
  plan: TopicPlan,
  p: { records: number; keys: number; topicPartitions: number; valueBytes: number; dupShare: number },
  store: { storedPerKey: number[]; pidOf: number[] } | undefined,
  seed: number,
): Promise<void> {
  const kafka = kafkaClient(brokers, 'queen-bench-dups-producer');
  await createTopic(kafka, plan.name, p.topicPartitions);
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const rnd = rng(seed);
  const next = new Array<number>(p.keys).fill(0);
  let i = 0;
  const chunk = (): Message[] => {
    const out: Message[] = [];
    for (; i < p.records && out.length < 5000; i++) {
      const k = i % p.keys;
      let txn: string;
      let seq: number;
      const resend = plan.kind === 'dups10' && rnd() < p.dupShare;
      const stored = store?.storedPerKey[k] ?? 0;
      if (resend && stored > 0 && (next[k] === 0 || rnd() < 0.5)) {
        seq = Math.floor(rnd() * stored);
        txn = `${STORED_TAG}-${store!.pidOf[k]}-${seq}`;
        plan.resends++;
        plan.resendsOfStored++;
      } else if (resend && next[k]! > 0) {
        seq = Math.floor(rnd() * next[k]!);
        txn = `${NEW_TAG}-${k}-${seq}`;
        plan.resends++;
      } else {
        seq = next[k]!++;
        txn = `${NEW_TAG}-${k}-${seq}`;
      }
      out.push({
        key: keyName(k),
        partition: k % p.topicPartitions,
        value: envelope(k, txn, seq, p.valueBytes).value,
        headers: { transactionId: txn },
      });
    }
    return out;
  };
  try {
    const worker = async (): Promise<void> => {
      for (let m = chunk(); m.length > 0; m = chunk()) await producer.send({ topic: plan.name, acks: -1, messages: m });
    };
    await Promise.all([worker(), worker()]);
  } finally {
    await producer.disconnect();
  }
  plan.newPerKey = next;
}

/**
 * Builds a template database holding S stored messages in every store:
 * the engine's queue (partitions named by the Kafka keys, window `windowSeconds`,
 * history by lib/synth.ts bulkLoad with real hashes in log_txns), the two
 * Connect sinks' tables and the kafkajs sink's table (the same (key, transactionId)s).
 */
async function buildStore(
  ctx: SuiteContext,
  size: number,
  p: { keys: number; valueBytes: number; windowSeconds: number; segFrames: number },
): Promise<Store> {
  const t0 = Date.now();
  const template = await createBenchDatabase(ctx.adminUrl, `kafka_dups_tmpl_${size}`);
  const pool = template.pool(4, 'queen-bench-load');
  try {
    const cursors: PartitionCursor[] = await provisionQueueNamed(
      pool,
      QUEUE,
      p.windowSeconds,
      Array.from({ length: p.keys }, (_, k) => keyName(k)),
    );
    const pidOf = cursors.map((c) => c.id);
    for (const table of Object.values(CONNECT_TABLE))
      await pool.query(
        `CREATE TABLE public.${table} (key text NOT NULL, transactionid text NOT NULL, seq bigint NOT NULL, body text NOT NULL, PRIMARY KEY (key, transactionid))`,
      );
    await pool.query(SINK_DDL(SINK_TABLE));
    const storedPerKey = Array.from({ length: p.keys }, (_, k) => Math.floor(size / p.keys) + (k < size % p.keys ? 1 : 0));
    if (size > 0) {
      const createdMs = Date.now();
      const loadTables = async (): Promise<void> => {
        const c1 = await pool.connect();
        const c2 = await pool.connect();
        try {
          const con = new BinaryCopyWriter(
            c1,
            `COPY public.${CONNECT_TABLE.connect} (key, transactionid, seq, body) FROM STDIN (FORMAT binary)`,
          );
          const snk = new BinaryCopyWriter(
            c2,
            `COPY bench_sink.${SINK_TABLE} (partition, transaction_id, payload, created_at) FROM STDIN (FORMAT binary)`,
          );
          const maxPer = Math.max(...storedPerKey);
          for (let s = 0; s < maxPer; s++) {
            for (let k = 0; k < p.keys; k++) {
              if (s >= storedPerKey[k]!) continue;
              const txn = `${STORED_TAG}-${pidOf[k]}-${s}`;
              const key = Buffer.from(keyName(k));
              const t = Buffer.from(txn);
              const { value, body } = envelope(k, txn, s, p.valueBytes);
              con.row(4);
              con.bytes(key);
              con.bytes(t);
              con.int8(s);
              con.bytes(Buffer.from(body));
              snk.row(4);
              snk.bytes(key);
              snk.bytes(t);
              snk.bytes(value);
              snk.timestamptz(createdMs);
            }
            if (s % 256 === 255) await Promise.all([con.ship(), snk.ship()]);
          }
          await Promise.all([con.end(), snk.end()]);
          // The default-config Connect sink's table: the same rows.
          await c1.query(`INSERT INTO public.${CONNECT_TABLE.connectDefault} SELECT * FROM public.${CONNECT_TABLE.connect}`);
        } finally {
          c1.release();
          c2.release();
        }
      };
      await Promise.all([
        bulkLoad(pool, {
          partitions: cursors.map((cursor) => ({ cursor, nextOffset: 0 })),
          counts: storedPerKey,
          factory: new MessageFactory(STORED_TAG, p.valueBytes),
          segFrames: p.segFrames,
          createdMs,
          engine: true,
          onProgress: (d, t) =>
            ctx.progress.note(`stored ${fmt(size)}: COPY ${fmt(d)}/${fmt(t)} messages into the engine store (and the sink tables)`),
        }),
        loadTables(),
      ]);
    }
    await pool.query(
      `ANALYZE queen.log_segments; ANALYZE queen.log_txns; ANALYZE queen.log_partitions; ANALYZE public.${CONNECT_TABLE.connect}; ANALYZE public.${CONNECT_TABLE.connectDefault}; ANALYZE bench_sink.${SINK_TABLE}`,
    );
    await checkpoint(pool);
    return { size, storedPerKey, pidOf, template, loadSeconds: (Date.now() - t0) / 1000 };
  } finally {
    await pool.end();
  }
}

/** Polls until the group caught up or the timeout; the rate is then committed records over elapsed time. */
async function waitCaughtUp(
  admin: Admin,
  group: string,
  topic: string,
  ends: Map<number, number>,
  t0: number,
  timeoutMs: number,
  alive: () => void,
): Promise<{ t1: number; committed: number; timedOut: boolean }> {
  for (;;) {
    alive();
    const g = await groupProgress(admin, group, topic, ends);
    const now = performance.now();
    if (g.done) return { t1: now, committed: g.committed, timedOut: false };
    if (now - t0 > timeoutMs) return { t1: now, committed: g.committed, timedOut: true };
    await sleep(25);
  }
}

/** Service exactness: each partition's new offsets hold exactly the topic's new transactionIds, each once; history untouched. */
async function checkService(pool: pg.Pool, store: Store, plan: TopicPlan): Promise<Check> {
  const r = await pool.query(
    'SELECT lp.id, lp.name, lp.last_offset FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1',
    [QUEUE],
  );
  const byPid = new Map<number, number>(r.rows.map((x) => [Number(x.id), Number(x.last_offset)]));
  let lost = 0;
  let doubled = 0;
  const hash = Buffer.allocUnsafe(HASH_BYTES);
  for (let k = 0; k < store.pidOf.length; k++) {
    const pid = store.pidOf[k]!;
    const stored = store.storedPerKey[k]!;
    const expected = new Set<string>();
    for (let j = 0; j < plan.newPerKey[k]!; j++) expected.add(hashTransactionId(`${NEW_TAG}-${k}-${j}`, hash, 0).toString('latin1'));
    const rows = await pool.query(
      'SELECT base_offset, end_offset, hashes FROM queen.log_txns WHERE partition_id = $1 AND end_offset >= $2 ORDER BY end_offset',
      [pid, stored],
    );
    const seen = new Set<string>();
    let n = 0;
    for (const row of rows.rows) {
      const base = Number(row.base_offset);
      const h: Buffer = row.hashes;
      for (let i = 0; i < h.length / HASH_BYTES; i++) {
        if (base + i < stored) continue; // history, loaded before the run
        n++;
        const s = h.toString('latin1', i * HASH_BYTES, (i + 1) * HASH_BYTES);
        if (seen.has(s) || !expected.has(s)) doubled++;
        seen.add(s);
      }
    }
    for (const s of expected) if (!seen.has(s)) lost++;
    const last = byPid.get(pid) ?? -1;
    if (last + 1 !== stored + n) doubled += Math.max(0, last + 1 - stored - n);
  }
  const expectedNew = plan.newPerKey.reduce((a, b) => a + b, 0);
  return { lost, doubled, detail: `${fmt(expectedNew)} new distinct expected: ${lost} lost, ${doubled} doubled or foreign` };
}

/** Sink exactness: the table holds the history plus each new (key, transactionId) once (its key enforces at most once). */
async function checkTable(pool: pg.Pool, store: Store, plan: TopicPlan, table: string, txnCol: string): Promise<Check> {
  const r = await pool.query(`SELECT count(*)::bigint AS n, count(*) FILTER (WHERE ${txnCol} LIKE $1)::bigint AS fresh FROM ${table}`, [
    `${NEW_TAG}-%`,
  ]);
  const n = Number(r.rows[0].n);
  const fresh = Number(r.rows[0].fresh);
  const expectedNew = plan.newPerKey.reduce((a, b) => a + b, 0);
  const lost = Math.max(0, expectedNew - fresh) + Math.max(0, store.size - (n - fresh));
  const doubled = Math.max(0, fresh - expectedNew) + Math.max(0, n - fresh - store.size);
  return { lost, doubled, detail: `${fmt(n)} rows, ${fmt(fresh)} new of ${fmt(expectedNew)} expected` };
}

export const kafkaDuplicates: Suite = {
  name: 'kafka-dups',
  needsKafka: true,
  async run(ctx: SuiteContext): Promise<SuiteResult> {
    const p = ctx.quick
      ? {
          records: sizeOverride('QUEEN_BENCH_RECORDS', 40_000),
          stored: sizeOverride('QUEEN_BENCH_STORED', 200_000),
          keys: 32,
          topicPartitions: 8,
          valueBytes: 290,
          dupShare: 0.1,
          reps: 1,
          windowSeconds: 86_400,
          segFrames: 1000,
          poolSize: POOL_SIZE,
          cacheMb: 512,
          runTimeoutS: 300,
          joinTimeoutS: 180,
        }
      : {
          records: sizeOverride('QUEEN_BENCH_RECORDS', 1_000_000),
          stored: sizeOverride('QUEEN_BENCH_STORED', 5_000_000),
          keys: 32,
          topicPartitions: 8,
          valueBytes: 290,
          dupShare: 0.1,
          // Three, not two: the median of two is their mean, and one disturbed
          // repetition decided the 5 M ratio (2026-12-03: 0.76 and 0.98 -> 0.87).
          reps: 3,
          windowSeconds: 86_400,
          segFrames: 1000,
          poolSize: POOL_SIZE,
          cacheMb: 512,
          runTimeoutS: 1200,
          joinTimeoutS: 180,
        };
    const sizes = [0, p.stored];
    const connectCfg: Record<ConnectSystem, ConnectSettings> = {
      connect: connectSettings('tuned', p.topicPartitions),
      connectDefault: connectSettings('default', p.topicPartitions),
    };
    const brokers = ctx.brokers!;
    const kafka = kafkaClient(brokers);
    const topics: string[] = [];
    const groups: string[] = [];
    const stores: Store[] = [];
    const clones: BenchDatabase[] = [];
    const runs: Run[] = [];
    const notes: string[] = [];
    // QUEEN_BENCH_PART=workers: only the service-pod rows (lib/servicePod.ts), no Connect, no dup-free topic.
    const only = workerRowsOnly();
    const totalSteps = (only ? 2 : 3) + p.reps * ((only ? 0 : 1 + SYSTEMS.length) + 1 + sizes.length);
    let step = 0;
    const admin = kafka.admin();
    await admin.connect();
    const [brokerHost, brokerPort] = brokers[0]!.split(':');
    const brokerPid = listenerPid(brokerHost!, Number(brokerPort));
    watchBroker(brokerPid);
    try {
      let home: ConnectHome | undefined;
      if (!only) {
        ctx.progress.step(++step, totalSteps, 'fetching Kafka Connect + Debezium JDBC sink (cached under .local/connect)');
        home = await fetchConnect();
      }

      // 1. Stored history: one template per size (the 0 template is empty but provisioned alike).
      ctx.progress.step(++step, totalSteps, `loading stored history templates (${sizes.map((s) => fmt(s)).join(', ')} messages)`);
      for (const size of sizes) stores.push(await buildStore(ctx, size, p));
      const pidOf = stores[0]!.pidOf;
      for (const s of stores) if (s.pidOf.join() !== pidOf.join()) throw new Error('partition ids differ between templates');

      // 2. Topics: dup-free (also the replay's), and 10 % re-sends per size.
      ctx.progress.step(
        ++step,
        totalSteps,
        `producing ${fmt(p.records)} records x ${(only ? 0 : 1) + sizes.length} topics (${p.keys} keys, ${p.topicPartitions} partitions, ${p.valueBytes}-byte values)`,
      );
      const mk = (kind: TopicPlan['kind'], storedSize: number): TopicPlan => {
        const t: TopicPlan = {
          name: uniqueName(`bench-dups-${kind}-${storedSize}`),
          kind,
          storedSize,
          newPerKey: [],
          resends: 0,
          resendsOfStored: 0,
        };
        topics.push(t.name);
        return t;
      };
      const free = mk('dupfree', 0);
      if (!only) await produceTopic(brokers, free, p, undefined, 1);
      const dupTopics = new Map<number, TopicPlan>();
      for (const st of stores) {
        const t = mk('dups10', st.size);
        await produceTopic(brokers, t, p, st, 2 + st.size);
        dupTopics.set(st.size, t);
      }
      const ends = new Map<string, Map<number, number>>();
      for (const t of [...(only ? [] : [free]), ...dupTopics.values()]) {
        const e = await withAdmin(kafka, (a) => endOffsets(a, t.name));
        const n = [...e.values()].reduce((a, b) => a + b, 0);
        if (n !== p.records) throw new Error(`topic ${t.name} holds ${n} records, expected ${p.records}`);
        ends.set(t.name, e);
      }

      // 3. Measurements. Per repetition and size: clone A (dup-free, then the
      // replay of the same topic over it) and clone B (10 % dups); the order
      // of runs is below the measuring function.
      const measure = async (
        rep: number,
        store: Store,
        db: BenchDatabase,
        pool: pg.Pool,
        system: System,
        workload: Workload,
        plan: TopicPlan,
      ): Promise<Run> => {
        const group = uniqueName(`bench-dups-${system}`);
        let stop: () => Promise<void> = async () => undefined;
        let alive: () => void = () => undefined;
        let grp = group;
        let metricsText: (() => Promise<string>) | undefined;
        await settle();
        if (system === 'service') {
          const s = await startIngestStack({
            databaseUrl: db.url,
            brokers,
            topic: plan.name,
            queue: QUEUE,
            group,
            poolSize: p.poolSize,
            cacheMb: p.cacheMb,
          });
          stop = () => s.stop();
          metricsText = () => s.metrics.render();
        } else if (system === 'sink') {
          const s = await startKafkaSink({
            brokers,
            group,
            topic: plan.name,
            pool,
            table: SINK_TABLE,
            settings: CONSUMER_SETTINGS,
            tableExists: true,
          });
          stop = () => s.stop();
        } else {
          const settings = connectCfg[system];
          const c = await startConnectSink({
            home: home!,
            brokers,
            databaseUrl: db.url,
            topic: plan.name,
            table: CONNECT_TABLE[system],
            connector: group,
            settings,
          });
          stop = () => c.stop();
          grp = c.group;
          groups.push(grp);
          try {
            await waitJoined(admin, c, settings.tasksMax, p.joinTimeoutS * 1000);
            await checkApplied(c, settings);
          } catch (err) {
            await stop();
            throw err;
          }
          alive = () => {
            if (c.child.exitCode !== null || c.child.signalCode !== null)
              throw new Error(`Kafka Connect exited (${c.child.exitCode ?? c.child.signalCode}) mid-run`);
          };
        }
        if (!isConnect(system)) groups.push(grp);
        const c0 = cpuSnapshot();
        const t0 = performance.now();
        let w: { t1: number; committed: number; timedOut: boolean };
        let cpu: CpuDelta;
        let probes: Run['probes'];
        try {
          w = await waitCaughtUp(admin, grp, plan.name, ends.get(plan.name)!, t0, p.runTimeoutS * 1000, alive);
          cpu = cpuSince(c0);
          if (metricsText) probes = readProbes(parsePromText(await metricsText()));
        } finally {
          await stop();
        }
        const seconds = (w.t1 - t0) / 1000;
        const check = w.timedOut
          ? undefined
          : system === 'service'
            ? await checkService(pool, store, plan)
            : isConnect(system)
              ? await checkTable(pool, store, plan, `public.${CONNECT_TABLE[system]}`, 'transactionid')
              : await checkTable(pool, store, plan, `bench_sink.${SINK_TABLE}`, 'transaction_id');
        const run: Run = {
          rep,
          size: store.size,
          workload,
          system,
          recordsPerS: w.committed / seconds,
          seconds,
          timedOut: w.timedOut,
          check,
          exact: !!check && check.lost === 0 && check.doubled === 0,
          cpu,
          probes,
        };
        ctx.progress.note(
          `${system} ${workload} at ${fmt(store.size)}: ${fmt(run.recordsPerS)} rec/s${w.timedOut ? ` (TIMED OUT after ${p.runTimeoutS} s, ${fmt(w.committed)} committed)` : ''}; ${check ? check.detail : 'exactness not checked'}${probes ? `; probes run/skipped/hinted ${probes.run ?? 'n/a'}/${probes.skipped ?? 'n/a'}/${probes.hinted ?? 'n/a'}` : ''}`,
        );
        return run;
      };

      // Each ratio pairs two runs of one system in one repetition, and the
      // host drifts: steal came and went within minutes (2026-12-03: 23 % of
      // the machine in one run, 9 % in its pair). So every clone of a
      // repetition is made first, and then each system runs its six runs
      // (three workloads at two sizes) back to back: a pair is at most a few
      // runs apart, not a whole other clone's worth of Connect and sink runs
      // (minutes) as before. The order inside the six alternates between
      // repetitions (dup-free or 10 % first, small or large store first), so
      // a drift within them does not always favour the same side. The replay
      // goes after the dup-free run of its clone, which it re-reads. The
      // service and the tuned Connect sink (the targets' pair) run next to
      // each other, taking turns going first; the info-only systems follow.
      // The default-config Connect sink runs only its 10 % dups runs, in the
      // same order.
      const orderOf = (rep: number): [Workload, number][] => {
        const [s0, s1] = rep % 2 === 0 ? [sizes[0]!, sizes[1]!] : [sizes[1]!, sizes[0]!];
        return rep % 2 === 0
          ? [
              ['dupfree', s0],
              ['dupfree', s1],
              ['dups10', s1],
              ['dups10', s0],
              ['replay', s0],
              ['replay', s1],
            ]
          : [
              ['dups10', s0],
              ['dups10', s1],
              ['dupfree', s1],
              ['dupfree', s0],
              ['replay', s0],
              ['replay', s1],
            ];
      };
      // The service pod, 1 worker and 2, on the 10 % dups topic of each size:
      // each arm on a clone of its own (both write the queue the service's
      // runs write), the pair back to back, which goes first alternating
      // between repetitions like the sizes.
      const podPairs = async (rep: number): Promise<void> => {
        const dbs = new Map<string, { db: BenchDatabase; pool: pg.Pool }>();
        try {
          ctx.progress.step(++step, totalSteps, `rep ${rep + 1}/${p.reps}: cloning the stored-history templates for the service pods`);
          for (const store of stores)
            for (const pod of POD_SYSTEMS) {
              const db = await createBenchDatabase(ctx.adminUrl, `kafka_dups_${store.size}_${pod}`, { template: store.template.name });
              clones.push(db);
              dbs.set(`${store.size}_${pod}`, { db, pool: db.pool(2, 'queen-bench-check') });
            }
          const pods: PodSystem[] = rep % 2 === 0 ? ['pod1', 'pod2'] : ['pod2', 'pod1'];
          for (const size of rep % 2 === 0 ? sizes : [...sizes].reverse()) {
            ctx.progress.step(
              ++step,
              totalSteps,
              `rep ${rep + 1}/${p.reps}: ${pods.map((x) => POD_LABEL[x]).join(' then ')}, 10% dups at ${fmt(size)} stored`,
            );
            const store = stores.find((s) => s.size === size)!;
            for (const pod of pods) {
              const { db, pool } = dbs.get(`${size}_${pod}`)!;
              runs.push(await measurePod(rep, store, db, pool, pod, dupTopics.get(size)!));
            }
          }
        } finally {
          for (const { db, pool } of dbs.values()) {
            await pool.end();
            await db.drop();
            clones.splice(clones.indexOf(db), 1);
          }
        }
      };
      const measurePod = async (
        rep: number,
        store: Store,
        db: BenchDatabase,
        pool: pg.Pool,
        system: PodSystem,
        plan: TopicPlan,
      ): Promise<Run> => {
        const workers = system === 'pod1' ? 1 : 2;
        const group = uniqueName(`bench-dups-${system}`);
        groups.push(group);
        await settle();
        const pod = await ServicePod.start(
          {
            databaseUrl: db.url,
            brokers,
            topic: plan.name,
            queue: QUEUE,
            group,
            workers,
            poolSize: p.poolSize,
            cacheMb: p.cacheMb,
            gate: true,
          },
          admin,
        );
        let d;
        let probes: Run['probes'];
        try {
          d = await drainTimed(pod, admin, ends.get(plan.name)!, p.runTimeoutS * 1000);
          probes = readProbes(await pod.scrape());
        } finally {
          await pod.stop();
        }
        const check = d.timedOut ? undefined : await checkService(pool, store, plan);
        const run: Run = {
          rep,
          size: store.size,
          workload: 'dups10',
          system,
          recordsPerS: d.recordsPerS,
          seconds: d.seconds,
          timedOut: d.timedOut,
          check,
          exact: !!check && check.lost === 0 && check.doubled === 0,
          cpu: d.cpu,
          probes,
        };
        const u = cpuPerRecord(d.cpu, d.records);
        ctx.progress.note(
          `${POD_LABEL[system]} at ${fmt(store.size)}: ${fmt(run.recordsPerS)} rec/s${d.timedOut ? ` (TIMED OUT after ${p.runTimeoutS} s)` : ''}; ${check ? check.detail : 'exactness not checked'}; CPU per record Node ${u.node.toFixed(1)} / PostgreSQL ${u.postgres.toFixed(1)} / Kafka ${u.kafka.toFixed(1)} µs`,
        );
        return run;
      };

      for (let rep = 0; rep < p.reps; rep++) {
        if (only) {
          await podPairs(rep);
          continue;
        }
        const dbs = new Map<string, { db: BenchDatabase; pool: pg.Pool }>();
        const clone = (size: number, workload: Workload): string => `${size}_${workload === 'dups10' ? 'B' : 'A'}`;
        try {
          ctx.progress.step(++step, totalSteps, `rep ${rep + 1}/${p.reps}: cloning the stored-history templates`);
          for (const store of stores)
            for (const part of ['A', 'B'] as const) {
              const tc = Date.now();
              const db = await createBenchDatabase(ctx.adminUrl, `kafka_dups_${store.size}_${part}`, { template: store.template.name });
              clones.push(db);
              dbs.set(`${store.size}_${part}`, { db, pool: db.pool(2, 'queen-bench-check') });
              ctx.progress.note(`cloned the ${fmt(store.size)}-message template in ${((Date.now() - tc) / 1000).toFixed(1)} s`);
            }
          const systems: System[] =
            rep % 2 === 0 ? ['service', 'connect', 'connectDefault', 'sink'] : ['connect', 'service', 'sink', 'connectDefault'];
          for (const system of systems) {
            ctx.progress.step(
              ++step,
              totalSteps,
              `rep ${rep + 1}/${p.reps}: ${LABEL[system]}, ${RUNS_OF[system].map((w) => WLABEL[w]).join(', ')} at ${sizes.map((s) => fmt(s)).join(' and ')} stored`,
            );
            for (const [workload, size] of orderOf(rep).filter(([w]) => RUNS_OF[system].includes(w))) {
              const store = stores.find((s) => s.size === size)!;
              const { db, pool } = dbs.get(clone(size, workload))!;
              const topic = workload === 'dups10' ? dupTopics.get(size)! : free;
              runs.push(await measure(rep, store, db, pool, system, workload, topic));
            }
          }
        } finally {
          for (const { db, pool } of dbs.values()) {
            await pool.end();
            await db.drop();
            clones.splice(clones.indexOf(db), 1);
          }
        }
        await podPairs(rep);
      }
      const pods = podReport(p, sizes, runs, brokerPid);
      if (only)
        return {
          name: 'kafka-dups',
          params: {
            ...p,
            part: 'workers',
            sizes,
            queue: QUEUE,
            topics: { dups10: Object.fromEntries([...dupTopics].map(([s, t]) => [s, t.name])) },
          },
          results: pods.results,
          samples: { runs },
          targets: pods.targets,
          info: pods.info,
          notes: pods.notes,
        };
      const r = report(p, sizes, runs, stores, free, dupTopics, notes, connectCfg);
      r.targets.push(...pods.targets);
      r.info!.push(...pods.info);
      r.notes!.push(...pods.notes);
      r.results.pods = pods.results;
      return r;
    } finally {
      watchBroker(undefined);
      await admin.disconnect().catch(() => undefined);
      await deleteTopicsAndGroups(
        kafka,
        topics.flatMap((t) => [t, `${t}.dlq`]),
        groups,
      );
      for (const d of clones) await d.drop().catch(() => undefined);
      for (const s of stores) await s.template.drop().catch(() => undefined);
    }
  },
};

function readProbes(samples: PromSample[]): Run['probes'] {
  const histName = histogramNames(samples, /^queen_probe_/)[0];
  const h = histName ? promHistogram(samples, histName) : undefined;
  return {
    run: promSum(samples, 'queen_probe_run_total'),
    skipped: promSum(samples, 'queen_probe_skipped_total'),
    hinted: promSum(samples, 'queen_probe_hinted_total'),
    hist: h ? { name: h.name, count: h.count, p50: h.quantile(0.5), p99: h.quantile(0.99) } : undefined,
  };
}

/**
 * The service-pod rows: workers 2 / workers 1 on the 10 % dups workload at
 * each size (the median of per-repetition ratios, each pair back to back),
 * the pods' exactness, their rates per repetition and their CPU.
 */
function podReport(
  p: { reps: number; poolSize: number; cacheMb: number; [k: string]: unknown },
  sizes: number[],
  runs: Run[],
  brokerPid: number | undefined,
): { targets: Target[]; info: Info[]; notes: string[]; results: Record<string, unknown> } {
  const reps = Array.from({ length: p.reps }, (_, i) => i);
  const find = (rep: number, system: PodSystem, size: number): Run | undefined =>
    runs.find((r) => r.rep === rep && r.system === system && r.size === size);
  const rateMed = (system: PodSystem, size: number): number => median(reps.map((r) => find(r, system, size)?.recordsPerS ?? NaN));
  const targets: Target[] = [];
  for (const size of sizes) {
    const xs: number[] = [];
    let ok = true;
    for (const r of reps) {
      const a = find(r, 'pod2', size);
      const b = find(r, 'pod1', size);
      if (!a || !b || !a.exact || !b.exact) ok = false;
      xs.push((a?.recordsPerS ?? NaN) / (b?.recordsPerS ?? NaN));
    }
    const t = target(
      `workers 2 / workers 1: ${size === 0 ? 'empty store' : `${fmt(size)} stored`}, 10% re-sent ids (records/s)`,
      median(xs),
      '>=',
      1.3,
      { ratio: true, value: `${fmt(rateMed('pod2', size))} rec/s`, baseline: `${fmt(rateMed('pod1', size))} rec/s` },
    );
    if (!ok) {
      t.met = false;
      t.value = t.value! + ' (a run behind it was not exact or timed out)';
    }
    targets.push(t);
  }
  const info: Info[] = [];
  for (const system of POD_SYSTEMS) {
    const mine = runs.filter((r) => r.system === system);
    const lost = mine.reduce((a, r) => a + (r.check?.lost ?? 0), 0);
    const doubled = mine.reduce((a, r) => a + (r.check?.doubled ?? 0), 0);
    const unchecked = mine.filter((r) => !r.check).length;
    targets.push(
      target(
        `exact, ${POD_LABEL[system]}: lost + doubled (key, transactionId) over all runs`,
        unchecked > 0 ? NaN : lost + doubled,
        '<=',
        0,
        {
          value: `${lost} lost, ${doubled} doubled in ${mine.length} runs${unchecked ? `, ${unchecked} not checked (timed out)` : ''}`,
        },
      ),
    );
  }
  const stealShare = (r: Run): string => `${Math.round((100 * r.cpu.stealMs) / Math.max(1, r.cpu.capacityMs))}%`;
  for (const size of sizes) {
    info.push({
      name: `service pod 10% dups at ${fmt(size)}: rec/s per repetition, workers 1 / workers 2 (steal share)`,
      value: reps
        .map((rep) => [find(rep, 'pod1', size), find(rep, 'pod2', size)])
        .map(([a, b]) => (a && b ? `${fmt(a.recordsPerS)} / ${fmt(b.recordsPerS)} (${stealShare(a)} / ${stealShare(b)})` : 'n/a'))
        .join(', '),
    });
    const cpuOf = (system: PodSystem): CpuDelta => addCpu(runs.filter((r) => r.system === system && r.size === size).map((r) => r.cpu));
    const records = (system: PodSystem): number =>
      runs.filter((r) => r.system === system && r.size === size).reduce((a, r) => a + r.recordsPerS * r.seconds, 0);
    const us = (system: PodSystem): string => {
      const u = cpuPerRecord(cpuOf(system), records(system));
      return `${u.node.toFixed(1)} / ${u.postgres.toFixed(1)} / ${u.kafka.toFixed(1)} µs`;
    };
    info.push({
      name: `workers 2 / workers 1: CPU per record, Node / PostgreSQL / Kafka (µs), 10% dups at ${fmt(size)}`,
      value: us('pod2'),
      baseline: us('pod1'),
    });
    info.push({
      name: `CPU while consuming, 10% dups at ${fmt(size)}: service pod, workers 1 / workers 2`,
      value: fmtShares(cpuOf('pod1'), true),
      baseline: fmtShares(cpuOf('pod2'), true),
    });
  }
  const notes: string[] = [];
  for (const r of runs.filter((x) => isPod(x.system))) {
    if (r.timedOut) notes.push(`${r.system} at ${r.size} (rep ${r.rep + 1}) timed out; its rate is committed records over the time waited`);
    if (r.check && !r.exact) notes.push(`NOT EXACT: ${r.system} at ${r.size} (rep ${r.rep + 1}): ${r.check.detail}`);
  }
  const kafkaWhat = brokerPid !== undefined ? `the broker's process (pid ${brokerPid})` : 'every java process on the host';
  return {
    targets,
    info,
    notes: [
      ...notes,
      `service pod rows: node dist/src/main.js with QUEEN_PG_POOL_SIZE=${p.poolSize} and QUEEN_DEDUP_CACHE_MB=${p.cacheMb} for the whole pod in both arms (2 workers: ${Math.max(1, Math.floor(p.poolSize / 2))} connections and ${p.cacheMb / 2} MB of cache each), the service's other defaults, consuming the 10% dups topic into the stored-history queue of a clone of its own; timed from every worker being a group member (queen_kafka_consumer_up 1 in the pod's /metrics, a gate member holding the group until every worker asked to join: lib/servicePod.ts) to the committed offsets reaching every partition's end. CPU: pod / Node = its primary and workers; the per-record Kafka µs is ${kafkaWhat}, the shares' kafka every java process as in the other rows.`,
    ],
    results: {
      recordsPerS: Object.fromEntries(POD_SYSTEMS.map((s) => [s, Object.fromEntries(sizes.map((size) => [size, rateMed(s, size)]))])),
      exact: Object.fromEntries(POD_SYSTEMS.map((s) => [s, runs.filter((r) => r.system === s).every((r) => r.exact)])),
      poolSize: p.poolSize,
      cacheMb: p.cacheMb,
    },
  };
}

function report(
  p: { records: number; stored: number; reps: number; [k: string]: unknown },
  sizes: number[],
  runs: Run[],
  stores: Store[],
  free: TopicPlan,
  dupTopics: Map<number, TopicPlan>,
  notes: string[],
  connectCfg: Record<ConnectSystem, ConnectSettings>,
): SuiteResult {
  const S = sizes[sizes.length - 1]!;
  const find = (rep: number, system: System, workload: Workload, size: number): Run | undefined =>
    runs.find((r) => r.rep === rep && r.system === system && r.workload === workload && r.size === size);
  const reps = Array.from({ length: p.reps }, (_, i) => i);
  const rateMed = (system: System, workload: Workload, size: number): number =>
    median(reps.map((r) => find(r, system, workload, size)?.recordsPerS ?? NaN));
  /** Median over repetitions of a per-repetition ratio; `ok` false if any run behind it was inexact or timed out. */
  const ratio = (a: [System, Workload, number], b: [System, Workload, number]): { value: number; ok: boolean } => {
    const xs: number[] = [];
    let ok = true;
    for (const r of reps) {
      const x = find(r, ...a);
      const y = find(r, ...b);
      if (!x || !y || !x.exact || !y.exact) ok = false;
      xs.push((x?.recordsPerS ?? NaN) / (y?.recordsPerS ?? NaN));
    }
    return { value: median(xs), ok };
  };
  const rated = (name: string, a: [System, Workload, number], b: [System, Workload, number], goal: number): Target => {
    const r = ratio(a, b);
    const t = target(name, r.value, '>=', goal, {
      ratio: true,
      value: `${fmt(rateMed(...a))} rec/s`,
      baseline: `${fmt(rateMed(...b))} rec/s`,
    });
    if (!r.ok) {
      t.met = false;
      t.value = t.value! + ' (a run behind it was not exact or timed out)';
    }
    return t;
  };
  const targets: Target[] = [];
  for (const size of sizes)
    targets.push(
      rated(`service: 10% dups / dup-free at ${fmt(size)} stored`, ['service', 'dups10', size], ['service', 'dupfree', size], 0.9),
    );
  for (const size of sizes)
    targets.push(
      rated(
        `service: replay (100% dups) / dup-free at ${fmt(size)} stored`,
        ['service', 'replay', size],
        ['service', 'dupfree', size],
        0.7,
      ),
    );
  for (const w of WORKLOADS)
    targets.push(rated(`service ${WLABEL[w]}: at ${fmt(S)} stored / at 0`, ['service', w, S], ['service', w, 0], 0.9));
  // Issue 39: against the sink as its users tune it, not its defaults.
  targets.push(
    rated(`service / tuned Connect JDBC sink, 10% dups at ${fmt(S)} stored`, ['service', 'dups10', S], ['connect', 'dups10', S], 2.5),
  );
  targets.push(rated(`service / tuned Connect JDBC sink, 10% dups at 0 stored`, ['service', 'dups10', 0], ['connect', 'dups10', 0], 2.5));
  const info: Info[] = [];
  for (const system of SYSTEMS) {
    const mine = runs.filter((r) => r.system === system);
    const lost = mine.reduce((a, r) => a + (r.check?.lost ?? 0), 0);
    const doubled = mine.reduce((a, r) => a + (r.check?.doubled ?? 0), 0);
    const unchecked = mine.filter((r) => !r.check).length;
    const name = `exact, ${LABEL[system]}: lost + doubled (key, transactionId) over all runs`;
    const value = `${lost} lost, ${doubled} doubled in ${mine.length} runs${unchecked ? `, ${unchecked} not checked (timed out)` : ''}`;
    // The default-config sink is there for comparison only: no target of its own.
    if (system === 'connectDefault') info.push({ name, value });
    else targets.push(target(name, unchecked > 0 ? NaN : lost + doubled, '<=', 0, { value }));
  }
  for (const size of sizes) {
    for (const w of WORKLOADS) {
      const r = ratio(['service', w, size], ['sink', w, size]);
      info.push({
        name: `service / kafkajs ON CONFLICT sink, ${WLABEL[w]} at ${fmt(size)}`,
        value: `${fmt(rateMed('service', w, size))} rec/s`,
        baseline: `${fmt(rateMed('sink', w, size))} rec/s`,
        ratio: r.value,
      });
    }
    for (const w of ['dupfree', 'replay'] as Workload[]) {
      const r = ratio(['service', w, size], ['connect', w, size]);
      info.push({
        name: `service / tuned Connect JDBC sink, ${WLABEL[w]} at ${fmt(size)}`,
        value: `${fmt(rateMed('service', w, size))} rec/s`,
        baseline: `${fmt(rateMed('connect', w, size))} rec/s`,
        ratio: r.value,
      });
    }
    // The configuration this baseline ran with before issue 39, and what tuning bought it.
    info.push({
      name: `service / default-config Connect JDBC sink, 10% dups at ${fmt(size)}`,
      value: `${fmt(rateMed('service', 'dups10', size))} rec/s`,
      baseline: `${fmt(rateMed('connectDefault', 'dups10', size))} rec/s`,
      ratio: ratio(['service', 'dups10', size], ['connectDefault', 'dups10', size]).value,
    });
    info.push({
      name: `tuned / default-config Connect JDBC sink, 10% dups at ${fmt(size)}`,
      value: `${fmt(rateMed('connect', 'dups10', size))} rec/s`,
      baseline: `${fmt(rateMed('connectDefault', 'dups10', size))} rec/s`,
      ratio: ratio(['connect', 'dups10', size], ['connectDefault', 'dups10', size]).value,
    });
  }
  for (const system of ['connect', 'sink'] as System[]) {
    const r = ratio([system, 'dups10', S], [system, 'dups10', 0]);
    info.push({
      name: `${LABEL[system]}: 10% dups at ${fmt(S)} / at 0`,
      value: `${fmt(rateMed(system, 'dups10', S))} rec/s`,
      baseline: `${fmt(rateMed(system, 'dups10', 0))} rec/s`,
      ratio: r.value,
    });
  }
  const na = (x: number | undefined): string => (x === undefined ? 'n/a' : String(x));
  // A histogram with no observation has NaN percentiles: say that no probe ran.
  const probeSizes = (h: { p50: number; p99: number; name: string }[]): string => {
    const p50 = median(h.map((x) => x.p50));
    const p99 = median(h.map((x) => x.p99));
    return Number.isFinite(p50) && Number.isFinite(p99) ? `${fmt(p50)}, ${fmt(p99)} (${h[0]!.name})` : `none: no probe ran (${h[0]!.name})`;
  };
  for (const size of sizes) {
    for (const w of WORKLOADS) {
      const xs = runs.filter((r) => r.system === 'service' && r.size === size && r.workload === w);
      const sum = (f: (r: Run) => number | undefined): number | undefined =>
        xs.some((r) => f(r) === undefined) ? undefined : xs.reduce((a, r) => a + f(r)!, 0);
      const h = xs.map((r) => r.probes?.hist).filter((x) => x !== undefined);
      info.push({
        name: `service probes, ${WLABEL[w]} at ${fmt(size)}: run / skipped / hinted; hashes per probe p50, p99`,
        value: `${na(sum((r) => r.probes?.run))} / ${na(sum((r) => r.probes?.skipped))} / ${na(sum((r) => r.probes?.hinted))}; ${h.length === xs.length && h.length > 0 ? probeSizes(h) : 'n/a'}`,
      });
    }
  }
  // What each ratio is made of: a pair whose runs lost very different shares
  // of the machine to steal says more about the host than about the service.
  const stealShare = (r: Run): string => `${Math.round((100 * r.cpu.stealMs) / Math.max(1, r.cpu.capacityMs))}%`;
  for (const size of sizes)
    for (const w of WORKLOADS)
      info.push({
        name: `service ${WLABEL[w]} at ${fmt(size)}: rec/s per repetition (steal share of the machine)`,
        value: reps
          .map((rep) => find(rep, 'service', w, size))
          .map((r) => (r ? `${fmt(r.recordsPerS)} (${stealShare(r)})` : 'n/a'))
          .join(', '),
      });
  for (const system of SYSTEMS)
    info.push({
      name: `CPU while consuming, 10% dups at ${fmt(S)}: ${LABEL[system]}`,
      value: fmtShares(addCpu(runs.filter((r) => r.system === system && r.size === S && r.workload === 'dups10').map((r) => r.cpu)), true),
    });
  info.push({
    name: 'topics: records, re-sends (10% dups topic at 0 / at S, of which into stored history)',
    value: `${fmt(p.records)}; ${[...dupTopics.values()].map((t) => `${fmt(t.resends)} (${fmt(t.resendsOfStored)})`).join(' / ')}`,
  });
  info.push({
    name: 'stored-history templates: load seconds per size',
    value: stores.map((s) => `${fmt(s.size)}: ${s.loadSeconds.toFixed(0)} s`).join(', '),
  });
  // The service pods' runs are podReport's.
  for (const r of runs.filter((x) => !isPod(x.system)))
    if (r.timedOut)
      notes.push(`${r.system} ${r.workload} at ${r.size} (rep ${r.rep + 1}) timed out; its rate is committed records over the time waited`);
  for (const r of runs.filter((x) => !isPod(x.system)))
    if (r.check && !r.exact) notes.push(`NOT EXACT: ${r.system} ${r.workload} at ${r.size} (rep ${r.rep + 1}): ${r.check.detail}`);
  const cfgText = (c: ConnectSettings): string =>
    `tasks.max=${c.tasksMax}, batch.size=${c.batchSize ?? 'default (500)'}, max.poll.records=${c.maxPollRecords ?? 'default (500)'}, ` +
    `reWriteBatchedInserts=${c.reWriteBatchedInserts}, use.reduction.buffer=${c.useReductionBuffer}`;
  notes.push(
    'Connect (kafka CPU share) = the broker plus the Connect worker JVM (both java). A Connect sink is timed from the moment all its task consumers joined its group; its offsets are committed every ' +
      `${connectCfg.connect.offsetFlushIntervalMs} ms (offset.flush.interval.ms), so its measured time includes up to that much commit delay.`,
    `Connect JDBC sink configurations: tuned ${cfgText(connectCfg.connect)}; default-config ${cfgText(connectCfg.connectDefault)} (10% dups runs only). ` +
      'Each run checks in the worker log that every task runs with its settings.',
    'The 10% dups topics differ between sizes: at S stored, half the re-sends (where history exists) name a stored transactionId of the same key; the dup-free topic is the same at both sizes.',
  );
  return {
    name: 'kafka-dups',
    params: {
      ...p,
      sizes,
      consumer: CONSUMER_SETTINGS,
      connect: { tuned: connectCfg.connect, default: connectCfg.connectDefault },
      queue: QUEUE,
      topics: { dupfree: free.name, dups10: Object.fromEntries([...dupTopics].map(([s, t]) => [s, t.name])) },
    },
    results: {
      recordsPerS: Object.fromEntries(
        SYSTEMS.map((s) => [
          s,
          Object.fromEntries(sizes.map((size) => [size, Object.fromEntries(RUNS_OF[s].map((w) => [w, rateMed(s, w, size)]))])),
        ]),
      ),
      exact: Object.fromEntries(SYSTEMS.map((s) => [s, runs.filter((r) => r.system === s).every((r) => r.exact)])),
    },
    samples: { runs: runs.map((r) => ({ ...r, cpu: r.cpu })) },
    curves: [
      {
        name: 'recs-per-s',
        title: 'Kafka -> PostgreSQL with duplicates: records/s by workload and stored size',
        xLabel: 'stored messages before the run',
        yLabel: 'records/s (median of repetitions)',
        series: SYSTEMS.flatMap((s) =>
          RUNS_OF[s].map((w) => ({
            name: `${LABEL[s]}, ${WLABEL[w]}`,
            points: sizes.map((size) => [size, rateMed(s, w, size)] as [number, number]),
          })),
        ),
      },
    ],
    targets,
    info,
    notes,
  };
}
