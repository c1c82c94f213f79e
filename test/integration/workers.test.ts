import anyTest, { type TestFn } from 'ava';
import http from 'node:http';
import { AssignerProtocol, type Kafka, type Message } from 'kafkajs';
import pg from 'pg';
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

/**
 * QUEEN_WORKERS > 1 (docs/scaling.md), the real service as OS processes: a
 * primary and two workers on the shared PostgreSQL and Kafka.
 */

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  kafka: Kafka;
  procs: ServiceProcess[];
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('workers');
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 2 }), kafka: kafkaClient(), procs: [] };
});
teardownAndCheckLeaks(test, async (t) => {
  await Promise.all(t.context.procs.map((p) => p.ensureDead()));
  await t.context.sql?.end();
  await t.context.db?.drop();
});

function start(t: { context: Ctx }, env: Record<string, string>): ServiceProcess {
  const p = new ServiceProcess({ DATABASE_URL: t.context.db.url, QUEEN_WORKERS: '2', ...env });
  t.context.procs.push(p);
  return p;
}

/** The port every worker shares (node:cluster), from a worker's log line. */
function portOf(p: ServiceProcess): number {
  return p.lines.find((l) => l.msg === 'HTTP API listening')!.port as number;
}

/** The pid of the worker in `slot` as the primary last reported it started. */
function workerPid(p: ServiceProcess, slot: number): number | undefined {
  const started = p.lines.filter((l) => l.msg === 'worker started' && l.slot === slot && l.pid === p.child.pid);
  return started.at(-1)?.workerPid as number | undefined;
}

/**
 * One request on its own connection (no keep-alive): node:cluster's primary
 * hands each new connection to the next worker in turn, so successive calls
 * reach both workers.
 */
function get(port: number, path: string, timeoutMs = 10_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false, timeout: timeoutMs, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}

/** The pod's /metrics as series text (name plus labels, as printed) -> value. */
async function scrape(port: number): Promise<Map<string, number>> {
  const r = await get(port, '/metrics');
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}: ${r.body}`);
  const out = new Map<string, number>();
  for (const line of r.body.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

test.serial('/metrics sums over the workers, each holds its share of the budgets, readiness covers every worker', async (t) => {
  const MiB = 1024 * 1024;
  const svc = start(t, { QUEEN_DEDUP_CACHE_MB: '64', QUEEN_PG_POOL_SIZE: '6' });
  await svc.ready('workers started', 120_000);
  const port = portOf(svc);
  const pids = [workerPid(svc, 0)!, workerPid(svc, 1)!];
  t.truthy(pids[0]);
  t.truthy(pids[1]);
  t.not(pids[0], pids[1]);

  const m0 = await scrape(port);
  t.is(m0.get('queen_workers'), 2, 'both workers answered the scrape: 1 each, summed');
  t.is(m0.get(`queen_worker_info{slot="0",pid="${pids[0]}"}`), 1);
  t.is(m0.get(`queen_worker_info{slot="1",pid="${pids[1]}"}`), 1);
  // The budget share: each worker's cache cap is QUEEN_DEDUP_CACHE_MB / 2, its pool QUEEN_PG_POOL_SIZE / 2.
  t.is(m0.get('queen_worker_dedup_cache_budget_bytes{slot="0"}'), 32 * MiB);
  t.is(m0.get('queen_worker_dedup_cache_budget_bytes{slot="1"}'), 32 * MiB);
  t.is(m0.get('queen_dedup_cache_budget_bytes'), 64 * MiB, "the pod's budget is the setting, not twice it");
  t.is(m0.get('queen_worker_pg_pool_max_connections{slot="0"}'), 3);
  t.is(m0.get('queen_worker_pg_pool_max_connections{slot="1"}'), 3);
  const conns = [...m0].filter(([k]) => k.startsWith('queen_pg_pool_connections{')).reduce((a, [, v]) => a + v, 0);
  t.true(conns <= 6, `the pod's pool connections (${conns}) stay within QUEEN_PG_POOL_SIZE`);
  // Not multiplied by the workers: build info is taken once, a 0/1 health gauge is the minimum.
  t.is(
    [...m0]
      .filter(([k]) => k.startsWith('queen_build_info{'))
      .map(([, v]) => v)
      .join(),
    '1',
  );
  t.is(m0.get('queen_postgres_up'), 1);

  // A counter both workers increment reads as the sum: 20 liveness calls on fresh connections land on both.
  const base = m0.get('queen_http_responses_total{status="200"}') ?? 0;
  const byPid = new Map<number, number>();
  for (let i = 0; i < 20; i++) {
    const r = await get(port, '/health/live');
    t.is(r.status, 200);
    const pid = (JSON.parse(r.body) as { worker: { pid: number } }).worker.pid;
    byPid.set(pid, (byPid.get(pid) ?? 0) + 1);
  }
  t.deepEqual([...byPid.keys()].sort(), [...pids].sort(), `both workers answered (${JSON.stringify([...byPid])})`);
  const m1 = await scrape(port);
  // + 1: the first scrape's own 200, counted after it had rendered.
  t.is(m1.get('queen_http_responses_total{status="200"}'), base + 20 + 1, "the pod counts every worker's responses");

  // Readiness answers for the pod: a frozen worker (SIGSTOP: its event loop cannot answer) makes it not ready.
  const ready = await get(port, '/health/ready');
  t.is(ready.status, 200, ready.body);
  t.deepEqual(
    (JSON.parse(ready.body) as { checks: { workers: { pid: number; ready: boolean }[] } }).checks.workers.map((w) => [w.pid, w.ready]),
    [
      [pids[0], true],
      [pids[1], true],
    ],
  );
  process.kill(pids[1]!, 'SIGSTOP');
  try {
    // A probe handed to the frozen worker itself gets no answer at all (it times out); one on worker 0 gets the pod's 503.
    const notReady = await waitFor(
      'a probe to report the frozen worker',
      async () => {
        const r = await get(port, '/health/ready', 6_000).catch(() => undefined);
        return r?.status === 503 ? r : undefined;
      },
      60_000,
      50,
    );
    t.regex(notReady.body, new RegExp(`worker 1 \\(pid ${pids[1]}\\): did not answer`));
  } finally {
    process.kill(pids[1]!, 'SIGCONT');
  }
  await waitFor('the pod to be ready again', async () => (await get(port, '/health/ready').catch(() => undefined))?.status === 200, 60_000);

  svc.kill('SIGTERM');
  t.is((await svc.exited).code, 0, 'every worker drained and exited 0');
  t.true(
    svc.lines.some((l) => l.msg === 'stopped' && l.pid === svc.child.pid),
    'the primary logged stopped',
  );
  t.is(svc.lines.filter((l) => l.msg === 'worker stopped').length, 2);
});

test.serial('a worker that keeps dying is replaced after a growing backoff; one that dies during start-up fails the start', async (t) => {
  const svc = start(t, {});
  await svc.ready('workers started', 120_000);
  const replacements = () => svc.lines.filter((l) => l.msg === 'worker exited; replacing it' && l.slot === 1);
  // First death: the worker had run, so it is replaced at once; the second comes before the first
  // replacement has lived 30 s, a crash loop, so the primary waits.
  for (let kill = 1; kill <= 2; kill++) {
    const victim = workerPid(svc, 1)!;
    process.kill(victim, 'SIGKILL');
    await waitFor(
      `replacement ${kill} of worker 1`,
      () => {
        const pid = workerPid(svc, 1);
        return pid !== undefined && pid !== victim;
      },
      120_000,
    );
  }
  const [first, second] = replacements();
  t.is(first!.delayMs, 0, 'the first death is replaced at once');
  t.true((second!.delayMs as number) >= 500, `a second early death waits (${String(second!.delayMs)} ms)`);
  t.true((second!.livedMs as number) < 30_000);
  svc.kill('SIGTERM');
  t.is((await svc.exited).code, 0);

  // A database that does not exist: every worker fails its start, and the pod exits 1 as the single process does.
  const bad = new ServiceProcess({ DATABASE_URL: `${t.context.db.url}_missing`, QUEEN_WORKERS: '2' });
  t.context.procs.push(bad);
  t.is((await bad.exited).code, 1);
  t.true(bad.lines.some((l) => l.msg === 'start-up failed' && l.pid === bad.child.pid));
});

/** Records with derived transactionIds (topic/partition/offset): the commit invariant is checkable per offset. */
const wave = (from: number, n: number): Message[] =>
  Array.from({ length: n }, (_, i) => ({ key: `k${(from + i) % 24}`, value: `v${from + i}` }));

/** Every offset below each committed offset has its record in the log (test/chaos/chaos.ts's check). */
async function assertCommitsBehindLog(t: { context: Ctx }, topic: string, group: string): Promise<number> {
  // Committed first, then the log: the log only grows, so this order cannot invent a violation.
  const c = await committed(t.context.kafka, group, topic);
  const stored = new Set((await storedFrames(t.context.sql, topic)).map((f) => f.transactionId));
  let committedRecords = 0;
  for (const [p, off] of c) {
    for (let o = 0; o < off; o++) {
      if (!stored.has(`${topic}/${p}/${o}`)) throw new Error(`partition ${p} offset ${o} is committed but not in the log`);
    }
    committedRecords += Math.max(0, off);
  }
  return committedRecords;
}

async function storedCount(sql: pg.Pool, queue: string): Promise<number> {
  const r = await sql.query(
    `SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)::int AS n FROM queen.log_txns t
     JOIN queen.log_partitions lp ON lp.id = t.partition_id JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1`,
    [queue],
  );
  return r.rows[0].n;
}

test.serial('SIGKILL of one worker mid-stream: it is replaced, nothing is lost or doubled, commits never pass the log', async (t) => {
  const { kafka, sql } = t.context;
  const topic = uniqueName('wkill');
  const group = uniqueName('g-wkill');
  await createTopic(kafka, topic, 6);
  const svc = start(t, {
    KAFKA_BROKERS: brokers().join(','),
    QUEEN_INGRESS_TOPICS: topic,
    QUEEN_INGRESS_GROUP: group,
    QUEEN_KAFKA_SESSION_TIMEOUT_MS: '6000',
    QUEEN_PG_POOL_SIZE: '8',
    // The wave's records carry no id: stored under topic/partition/offset, by choice.
    QUEEN_INGRESS_MISSING_ID: 'offset',
  });
  await svc.ready('workers started', 120_000);
  const port = portOf(svc);
  // Both consumers are group members (min over the workers is 1), so the six partitions are split between them.
  await waitFor('both workers to be group members', async () => (await scrape(port)).get('queen_kafka_consumer_up') === 1, 120_000, 200);
  const victim = workerPid(svc, 1)!;

  const WAVE = 30_000;
  const producing = produce(kafka, topic, wave(0, WAVE));
  await waitFor('the workers to store part of the wave', async () => (await storedCount(sql, topic)) > 500, 120_000, 5);
  process.kill(victim, 'SIGKILL');
  const atKill = await storedCount(sql, topic);
  await producing;
  t.true(atKill < WAVE, `the kill landed mid-stream (${atKill} of ${WAVE} stored)`);
  const committedAtKill = await assertCommitsBehindLog(t, topic, group);
  t.log(
    `worker 1 (pid ${victim}) killed with ${atKill} of ${WAVE} stored; ${committedAtKill} committed (all in the log) once the wave was produced`,
  );

  const replacement = await waitFor(
    'the primary to replace worker 1',
    () => {
      const pid = workerPid(svc, 1);
      return pid !== undefined && pid !== victim ? pid : undefined;
    },
    120_000,
  );
  t.true(svc.lines.some((l) => l.msg === 'worker exited; replacing it' && l.workerPid === victim && l.signal === 'SIGKILL'));
  // A second wave after the replacement: its consumer takes part.
  await produce(kafka, topic, wave(WAVE, 10_000));
  const produced = WAVE + 10_000;
  await waitFor('the pod to catch up', () => caughtUp(kafka, group, topic), 240_000, 200);
  await assertCommitsBehindLog(t, topic, group);
  const frames = await storedFrames(sql, topic);
  t.is(frames.length, produced, 'every record stored once');
  t.is(new Set(frames.map((f) => f.transactionId)).size, produced, 'no transactionId stored twice');
  const m = await scrape(port);
  t.is(m.get('queen_workers'), 2, 'the pod is back to two workers');
  t.truthy(m.get(`queen_worker_info{slot="1",pid="${replacement}"}`));
  t.is(m.get('queen_kafka_consumer_up'), 1);

  // SIGTERM drains as the single process does: everything stored is committed, no member left.
  svc.kill('SIGTERM');
  t.is((await svc.exited).code, 0);
  const highest = new Map<number, number>();
  for (const f of frames) {
    const [, p, o] = f.transactionId.split('/').map(Number) as [number, number, number];
    highest.set(p, Math.max(highest.get(p) ?? -1, o));
  }
  const c = await committed(kafka, group, topic);
  for (const [p, h] of highest) t.is(c.get(p), h + 1, `partition ${p}: all verified records committed`);
  t.is(await groupMemberCount(kafka, group), 0, 'no member left in the group');
});

/** Highest stored offset per partition, from the derived transactionIds (topic/partition/offset). */
function highestStored(frames: Awaited<ReturnType<typeof storedFrames>>): Map<number, number> {
  const highest = new Map<number, number>();
  for (const f of frames) {
    const [, p, o] = f.transactionId.split('/').map(Number) as [number, number, number];
    highest.set(p, Math.max(highest.get(p) ?? -1, o));
  }
  return highest;
}

/**
 * Holds an ACCESS EXCLUSIVE lock on queen.log_txns: every push waits behind
 * it, so the workers' in-flight chunks cannot settle and the pod's drain stays
 * open until `release()` (a window the test can observe, not a sleep).
 */
async function holdLogLock(t: { context: Ctx }): Promise<{ release: () => Promise<void> }> {
  const client = new pg.Client({ connectionString: t.context.db.url });
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE queen.log_txns IN ACCESS EXCLUSIVE MODE');
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      await client.query('COMMIT');
      await client.end();
    },
  };
}

/** The partitions of `topic` the group's members hold, one list per member (from the group's assignment). */
async function assignments(kafka: Kafka, group: string, topic: string): Promise<number[][]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const { groups } = await admin.describeGroups([group]);
    return groups[0]!.members.map((m) => AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment[topic] ?? []);
  } finally {
    await admin.disconnect();
  }
}

/**
 * Holds the log_partitions row locks (the lock every push of a log partition
 * takes first) of every log partition stored from the given Kafka partitions:
 * their chunks wait, while every other Kafka partition's pushes go through.
 * A log partition is the record key here, and one key lives on one Kafka
 * partition. Rows in ascending id, the service's lock order.
 */
async function holdPartitions(
  t: { context: Ctx },
  topic: string,
  partitions: number[],
): Promise<{ blocked: () => Promise<number>; release: () => Promise<void> }> {
  const names = new Set<string>();
  for (const f of await storedFrames(t.context.sql, topic)) {
    if (partitions.includes(Number(f.transactionId.split('/')[1]))) names.add(f.partition);
  }
  const client = new pg.Client({ connectionString: t.context.db.url });
  await client.connect();
  await client.query('BEGIN');
  const r = await client.query(
    `SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
     WHERE q.name = $1 AND lp.name = ANY($2::text[]) ORDER BY lp.id FOR UPDATE OF lp`,
    [topic, [...names]],
  );
  if (names.size === 0 || r.rowCount !== names.size) throw new Error(`locked ${r.rowCount} of ${names.size} log partition rows`);
  const holder = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  let released = false;
  return {
    blocked: async () => {
      const b = await t.context.sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))',
        [holder],
      );
      return b.rows[0]!.n;
    },
    release: async () => {
      if (released) return;
      released = true;
      await client.query('COMMIT');
      await client.end();
    },
  };
}

function streamEnv(topic: string, group: string): Record<string, string> {
  return {
    KAFKA_BROKERS: brokers().join(','),
    QUEEN_INGRESS_TOPICS: topic,
    QUEEN_INGRESS_GROUP: group,
    QUEEN_KAFKA_SESSION_TIMEOUT_MS: '6000',
    QUEEN_PG_POOL_SIZE: '8',
    // Far above what the test's drain needs: the drain ends because its chunks settle, never by this bound.
    QUEEN_SHUTDOWN_TIMEOUT_MS: '60000',
    QUEEN_INGRESS_MISSING_ID: 'offset',
  };
}

test.serial(
  'SIGTERM mid-stream at two workers: not ready at once, every stored record committed, exit 0, no member left, none respawned',
  async (t) => {
    const { kafka, sql } = t.context;
    const topic = uniqueName('wterm');
    const group = uniqueName('g-wterm');
    await createTopic(kafka, topic, 6);
    const svc = start(t, streamEnv(topic, group));
    await svc.ready('workers started', 120_000);
    const port = portOf(svc);
    await waitFor('both workers to be group members', async () => (await scrape(port)).get('queen_kafka_consumer_up') === 1, 120_000, 200);

    // A first wave gives every key (a log partition) its row; the second is the stream the stop lands in.
    const FIRST = 2_400;
    await produce(kafka, topic, wave(0, FIRST));
    await waitFor('the first wave to be committed', () => caughtUp(kafka, group, topic), 120_000, 100);
    const members = await assignments(kafka, group, topic);
    t.is(members.length, 2);
    t.true(
      members.every((m) => m.length > 0),
      `both members hold partitions (${JSON.stringify(members)})`,
    );
    // One worker's chunks wait on PostgreSQL: the other drains at once, and the pod's drain stays open until the lock goes.
    // The old stop let the drained worker leave here, and the rebalance refused the held worker's last commits.
    const lock = await holdPartitions(t, topic, members[0]!);
    const WAVE = 30_000;
    const producing = produce(kafka, topic, wave(FIRST, WAVE));
    try {
      // A chunk of the held worker is in flight (its push waits on the lock) when the stop begins.
      await waitFor('a push to wait on the held partitions', async () => (await lock.blocked()) > 0, 60_000, 5);
      svc.kill('SIGTERM');
      // Readiness turns at once, while the workers still drain: probes on fresh connections reach both workers.
      const first = await waitFor(
        'readiness to answer 503 stopping',
        async () => {
          const r = await get(port, '/health/ready').catch(() => undefined);
          return r?.status === 503 && r.body.includes('stopping') ? r : undefined;
        },
        30_000,
        20,
      );
      t.regex(first.body, /stopping: the pod is draining/);
      for (let i = 0; i < 4; i++) t.is((await get(port, '/health/ready')).status, 503, 'every worker answers not ready while draining');
      await waitFor('the worker whose partitions are free to drain', () => svc.lines.some((l) => l.msg === 'worker drained'), 60_000, 20);
      t.is((await assignments(kafka, group, topic)).length, 2, 'the drained worker stays in the group while the other still drains');
      t.true((await lock.blocked()) > 0, "the held worker's chunk is still in flight");
      t.false(
        svc.lines.some((l) => l.msg === 'every worker drained; they leave the group now (phase 2)'),
        'no worker leaves while one still drains',
      );
    } finally {
      await lock.release();
    }
    t.is((await svc.exited).code, 0, 'every worker drained, left and exited 0');
    await producing;

    const frames = await storedFrames(sql, topic);
    t.true(frames.length < FIRST + WAVE, `the stop landed mid-stream (${frames.length} of ${FIRST + WAVE} stored)`);
    t.is(new Set(frames.map((f) => f.transactionId)).size, frames.length, 'no transactionId stored twice');
    await assertCommitsBehindLog(t, topic, group);
    const highest = highestStored(frames);
    const c = await committed(kafka, group, topic);
    for (let p = 0; p < 6; p++) {
      t.is(Math.max(c.get(p) ?? -1, 0), (highest.get(p) ?? -1) + 1, `partition ${p}: committed exactly what PostgreSQL stored`);
    }
    t.log(`${frames.length} of ${FIRST + WAVE} stored at the stop, all committed: ${JSON.stringify([...c].sort((a, b) => a[0] - b[0]))}`);

    t.is(await groupMemberCount(kafka, group), 0, 'no member left in the group');
    const primary = svc.lines.filter((l) => l.pid === svc.child.pid);
    t.is(primary.filter((l) => l.msg === 'worker drained').length, 2, 'both workers reported drained');
    t.true(primary.some((l) => l.msg === 'every worker drained; they leave the group now (phase 2)'));
    t.false(
      primary.some((l) => l.msg === 'worker exited; replacing it'),
      'no worker was replaced during the stop',
    );
    t.is(primary.filter((l) => l.msg === 'worker forked').length, 2, 'no worker forked after the first two');
    const stopped = primary.filter((l) => l.msg === 'worker stopped');
    t.deepEqual(
      stopped.map((l) => [l.code, l.drained]),
      [
        [0, true],
        [0, true],
      ],
    );
  },
);

test.serial('a second SIGTERM during the drain forces the stop: every worker killed, exit 1 at once', async (t) => {
  const { kafka, sql } = t.context;
  const topic = uniqueName('wforce');
  const group = uniqueName('g-wforce');
  await createTopic(kafka, topic, 6);
  const svc = start(t, streamEnv(topic, group));
  await svc.ready('workers started', 120_000);
  const pids = [workerPid(svc, 0)!, workerPid(svc, 1)!];
  const producing = produce(kafka, topic, wave(0, 30_000));
  await waitFor('the workers to store part of the wave', async () => (await storedCount(sql, topic)) > 500, 120_000, 5);
  const lock = await holdLogLock(t);
  try {
    svc.kill('SIGTERM');
    await waitFor('the pod stop to begin', () => svc.lines.some((l) => l.msg === 'stopping: the workers drain (phase 1)'), 30_000, 20);
    const at = Date.now();
    svc.kill('SIGTERM');
    const exit = await svc.exited;
    const tookMs = Date.now() - at;
    t.is(exit.code, 1, 'a forced stop is not clean');
    // QUEEN_SHUTDOWN_TIMEOUT_MS is 60 s and the drain is held open: only the second signal can end it this soon.
    t.true(tookMs < 10_000, `the primary exited ${tookMs} ms after the second signal`);
    t.true(svc.lines.some((l) => l.msg === 'second signal during the stop: killing the workers' && l.pid === svc.child.pid));
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await waitFor('both workers to be gone', () => !pids.some(alive), 10_000, 20);
  } finally {
    await lock.release();
  }
  await producing;
  // Whatever was committed before the kill is behind the log; the rest is redelivered to the next pod.
  await assertCommitsBehindLog(t, topic, group);
});
