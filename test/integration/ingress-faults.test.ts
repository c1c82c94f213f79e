import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import anyTest, { type TestFn } from 'ava';
import type { Kafka, Message } from 'kafkajs';
import pg from 'pg';
import { migrate } from '../../src/engine/migrate.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import {
  brokers,
  caughtUp,
  committed,
  createTopic,
  groupMemberCount,
  kafkaClient,
  produce,
  storedFrames,
  uniqueName,
} from '../helpers/kafka.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';
import { ServiceProcess } from '../helpers/serviceProcess.js';
import { startIngestStack } from '../helpers/stack.js';

const run = promisify(execFile);
const PG_SCRIPT = fileURLToPath(new URL('../../../deploy/local/postgres.sh', import.meta.url));

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  kafka: Kafka;
  procs: ServiceProcess[];
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('faults');
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 2 }), kafka: kafkaClient(), procs: [] };
});
teardownAndCheckLeaks(test, async (t) => {
  await Promise.all(t.context.procs.map((p) => p.ensureDead()));
  await t.context.sql?.end();
  await t.context.db?.drop();
});

function serviceEnv(t: { context: Ctx }, topic: string, group: string): Record<string, string> {
  return {
    DATABASE_URL: t.context.db.url,
    KAFKA_BROKERS: brokers().join(','),
    QUEEN_INGRESS_TOPICS: topic,
    QUEEN_INGRESS_GROUP: group,
    QUEEN_KAFKA_SESSION_TIMEOUT_MS: '6000',
    QUEEN_PG_POOL_SIZE: '6',
    // The records carry no transactionId: the commit invariant is checked per offset under the derived id, chosen explicitly.
    QUEEN_INGRESS_MISSING_ID: 'offset',
  };
}

function start(t: { context: Ctx }, env: Record<string, string>): ServiceProcess {
  const p = new ServiceProcess(env);
  t.context.procs.push(p);
  return p;
}

/** Records with derived transactionIds (topic/partition/offset): the commit invariant is checkable per offset. */
const wave = (from: number, n: number): Message[] =>
  Array.from({ length: n }, (_, i) => ({ key: `k${(from + i) % 24}`, value: `v${from + i}` }));

/** Every offset below each committed offset has its record in the log. */
async function assertCommitsBehindLog(t: { context: Ctx }, topic: string, group: string): Promise<number> {
  const [c, frames] = await Promise.all([committed(t.context.kafka, group, topic), storedFrames(t.context.sql, topic)]);
  const stored = new Set(frames.map((f) => f.transactionId));
  let committedRecords = 0;
  for (const [p, off] of c) {
    for (let o = 0; o < off; o++) {
      if (!stored.has(`${topic}/${p}/${o}`)) throw new Error(`partition ${p} offset ${o} is committed but not in the log`);
    }
    committedRecords += Math.max(0, off);
  }
  return committedRecords;
}

/** Frames stored for a queue, counted from log_txns (cheap enough to poll). */
async function storedCount(sql: pg.Pool, queue: string): Promise<number> {
  const r = await sql.query(
    `SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)::int AS n FROM queen.log_txns t
     JOIN queen.log_partitions lp ON lp.id = t.partition_id JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1`,
    [queue],
  );
  return r.rows[0].n;
}

function assertExactlyOnce(
  t: { is: (a: unknown, b: unknown, m?: string) => void },
  frames: Awaited<ReturnType<typeof storedFrames>>,
  total: number,
) {
  t.is(frames.length, total, 'every record stored once');
  t.is(new Set(frames.map((f) => f.transactionId)).size, total, 'no transactionId stored twice');
}

test.serial('kill -9 mid-stream three times: the log ends exact and commits never pass the log', async (t) => {
  const { kafka, sql } = t.context;
  const topic = uniqueName('crash');
  const group = uniqueName('g-crash');
  await createTopic(kafka, topic, 6);
  const WAVE = 30_000;
  let produced = 0;
  for (let kill = 0; kill < 3; kill++) {
    const svc = start(t, serviceEnv(t, topic, group));
    await svc.ready();
    const before = await storedCount(sql, topic);
    // Kill while this wave is still being produced and ingested: mid-stream.
    const producing = produce(kafka, topic, wave(produced, WAVE));
    await waitFor('the service to store part of this wave', async () => (await storedCount(sql, topic)) > before + 500, 120_000, 5);
    svc.kill('SIGKILL');
    await svc.exited;
    const atKill = await storedCount(sql, topic);
    await producing;
    produced += WAVE;
    t.true(atKill < produced, `kill ${kill + 1} landed mid-stream (${atKill} of ${produced} stored)`);
    const committedRecords = await assertCommitsBehindLog(t, topic, group);
    t.log(`kill ${kill + 1}: ${atKill} stored at the kill, ${committedRecords} committed, ${produced} produced`);
  }
  const last = start(t, serviceEnv(t, topic, group));
  await last.ready();
  await waitFor('the restarted service to catch up', () => caughtUp(kafka, group, topic), 180_000, 200);
  await assertCommitsBehindLog(t, topic, group);
  assertExactlyOnce(t, await storedFrames(sql, topic), produced);
  last.kill('SIGTERM');
  t.is((await last.exited).code, 0);
});

test.serial('SIGTERM: leaves the group promptly, exits 0, and commits everything it verified', async (t) => {
  const { kafka, sql } = t.context;
  const topic = uniqueName('term');
  const group = uniqueName('g-term');
  await createTopic(kafka, topic, 4);
  // Two workers: the pod's two-phase stop (docs/scaling.md, "Stopping") commits
  // every worker's verified records before the first one leaves the group, so
  // no rebalance can refuse a worker's last commits.
  const svc = start(t, { ...serviceEnv(t, topic, group), QUEEN_WORKERS: '2' });
  await svc.ready('workers started', 120_000);
  await produce(kafka, topic, wave(0, 30_000));
  await waitFor('some records stored', async () => (await storedFrames(sql, topic)).length > 2000, 120_000, 20);
  svc.kill('SIGTERM');
  const exit = await svc.exited;
  t.is(exit.code, 0, 'clean exit');
  t.true(svc.lines.some((l) => l.msg === 'stopped'));
  // Everything stored is committed: per partition, committed offset = highest stored offset + 1.
  const frames = await storedFrames(sql, topic);
  const highest = new Map<number, number>();
  for (const f of frames) {
    const [, p, o] = f.transactionId.split('/').map(Number) as [number, number, number];
    highest.set(p, Math.max(highest.get(p) ?? -1, o));
  }
  const c = await committed(kafka, group, topic);
  if ([...highest].some(([p, h]) => c.get(p) !== h + 1))
    t.log(JSON.stringify(svc.lines.filter((l) => /commit|stop|drain|rebalanc|abandon|halt/i.test(String(l.msg))).slice(-40)));
  for (const [p, h] of highest) t.is(c.get(p), h + 1, `partition ${p}: all verified records committed`);
  await assertCommitsBehindLog(t, topic, group);
  t.is(await groupMemberCount(kafka, group), 0, 'no member left in the group');
});

test.serial('PostgreSQL restart mid-stream: the ingress recovers by itself and the log is exact', async (t) => {
  const { kafka } = t.context;
  // A private cluster, so restarting it cannot disturb other test files.
  const dir = fileURLToPath(new URL(`../../../.local/pg-restart-${randomBytes(3).toString('hex')}/`, import.meta.url));
  const env = { ...process.env, QUEEN_LOCAL_DIR: dir, QUEEN_PG_OPTS: '-c fsync=off' };
  const { stdout } = await run('bash', [PG_SCRIPT, 'start'], { env });
  const url = stdout
    .trim()
    .split('\n')
    .pop()!
    .replace(/^DATABASE_URL=/, '');
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => undefined);
  let stack: Awaited<ReturnType<typeof startIngestStack>> | undefined;
  try {
    await migrate(pool);
    const topic = uniqueName('pgrestart');
    const group = uniqueName('g-pgrestart');
    await createTopic(kafka, topic, 4);
    // Its records carry no id: each is stored under topic/partition/offset, chosen explicitly.
    stack = await startIngestStack({ databaseUrl: url, topic, group, ingress: { missingId: 'offset' } });
    await produce(kafka, topic, wave(0, 15_000));
    await waitFor('some records stored', async () => (await storedFrames(pool, topic).catch(() => [])).length > 1000, 120_000, 20);
    await run('bash', [PG_SCRIPT, 'restart'], { env });
    await produce(kafka, topic, wave(15_000, 15_000));
    await waitFor('catch-up after the restart', () => caughtUp(kafka, group, topic), 180_000, 200);
    assertExactlyOnce(t, await storedFrames(pool, topic), 30_000);
  } finally {
    await stack?.stop();
    await pool.end();
    await run('bash', [PG_SCRIPT, 'stop'], { env }).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
});
