import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import pg from 'pg';
import { pino } from 'pino';
import { DedupCache } from '../../src/dedup/index.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { unpackSegment } from '../../src/engine/frames.js';
import { configureQueue, getQueue } from '../../src/engine/queueConfig.js';
import { canVacuumLogTables } from '../../src/engine/retentionStore.js';
import { LogWriter, type PushItem, type PushResult } from '../../src/engine/writer.js';
import { CacheWatermarks } from '../../src/fusion/cacheWatermarks.js';
import { LogVacuum } from '../../src/retention/logVacuum.js';
import { RETENTION_FENCE_KEY, RETENTION_LOCK_KEY, RetentionService, type PassSummary } from '../../src/retention/retentionService.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { uuidToString } from '../../src/util/uuidv7.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  stops: (() => Promise<void>)[];
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('retention');
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 3 }), stops: [] };
});
teardownAndCheckLeaks(test, async (t) => {
  for (const s of t.context.stops.reverse()) await s();
  await t.context.sql?.end();
  await t.context.db?.drop();
});

/** One "broker" write path: its own pool and (optionally) its own dedup cache. */
async function broker(t: { context: Ctx }, cache: boolean) {
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ connectionString: t.context.db.url, poolSize: 3, metrics });
  await engine.start();
  t.context.stops.push(() => engine.stop());
  const c = cache ? new DedupCache({ capBytes: 64 << 20 }) : undefined;
  const writer = new LogWriter(engine, {
    maxPayloadBytes: 1024,
    metadataTtlMs: 0,
    watermarks: c ? new CacheWatermarks(c, engine, metrics) : undefined,
  });
  return { engine, writer };
}

/** A retention service for one test: stopped when the test ends, so the next test's service can lead. */
async function retention(
  t: ExecutionContext<Ctx>,
  batchRows: number,
  onStep?: ConstructorParameters<typeof RetentionService>[0]['onStep'],
) {
  const metrics = new MetricsRegistry();
  const svc = new RetentionService({ connectionString: t.context.db.url, intervalMs: 3_600_000, batchRows, metrics, onStep });
  await svc.start();
  t.teardown(() => svc.stop());
  return Object.assign(svc, { metrics });
}

const item = (queue: string, partition: string, txn: string): PushItem => ({
  queue,
  partition,
  transactionId: txn,
  payload: Buffer.from(JSON.stringify(txn)),
});

/** Ages a partition's rows below `below` by `seconds` (both tables unless `only`): time travel for stored data. */
async function age(
  sql: pg.Pool,
  queue: string,
  partition: string,
  below: number,
  seconds: number,
  only?: 'segments' | 'txns',
): Promise<void> {
  const pid = await partitionId(sql, queue, partition);
  if (only !== 'txns') {
    await sql.query(
      `UPDATE queen.log_segments SET created_at = created_at - make_interval(secs => $3) WHERE partition_id = $1 AND base_offset < $2`,
      [pid, below, seconds],
    );
  }
  if (only !== 'segments') {
    await sql.query(
      `UPDATE queen.log_txns SET created_at = created_at - make_interval(secs => $3) WHERE partition_id = $1 AND base_offset < $2`,
      [pid, below, seconds],
    );
  }
}

async function partitionId(sql: pg.Pool, queue: string, partition: string): Promise<number> {
  const r = await sql.query(
    'SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 AND lp.name = $2',
    [queue, partition],
  );
  return Number(r.rows[0].id);
}

/** Every stored message of a partition: offset -> id. */
async function storedIds(sql: pg.Pool, pid: number): Promise<Map<number, string>> {
  const r = await sql.query('SELECT base_offset, blob FROM queen.log_segments WHERE partition_id = $1 ORDER BY base_offset', [pid]);
  const out = new Map<number, string>();
  for (const row of r.rows) unpackSegment(row.blob).forEach((f, i) => out.set(Number(row.base_offset) + i, uuidToString(f.id)));
  return out;
}

async function partitionState(sql: pg.Pool, pid: number) {
  const r = await sql.query(
    `SELECT lp.log_start, lp.txns_start, lp.last_offset,
            (SELECT min(base_offset) FROM queen.log_segments WHERE partition_id = lp.id) AS first_seg,
            (SELECT min(base_offset) FROM queen.log_txns WHERE partition_id = lp.id) AS first_txn,
            (SELECT count(*) FROM queen.log_txns WHERE partition_id = lp.id) AS txn_rows
     FROM queen.log_partitions lp WHERE lp.id = $1`,
    [pid],
  );
  const row = r.rows[0];
  return {
    logStart: Number(row.log_start),
    txnsStart: Number(row.txns_start),
    last: Number(row.last_offset),
    firstSeg: row.first_seg === null ? null : Number(row.first_seg),
    firstTxn: row.first_txn === null ? null : Number(row.first_txn),
    txnRows: Number(row.txn_rows),
  };
}

test.serial('retention removes exactly the segments and log_txns rows past their limits, under concurrent pushes', async (t) => {
  const { sql } = t.context;
  const b = await broker(t, true);
  await configureQueue(sql, 'ret', { retentionSeconds: 3600, dedupWindowSeconds: 60 }, 'merge');
  const parts = ['p0', 'p1', 'p2'];
  const accepted = new Map<string, Map<number, string>>(parts.map((p) => [p, new Map()]));
  const note = (rs: PushResult[]) => {
    for (const r of rs) {
      t.is(r.status, 'queued');
      accepted.get(r.partition)!.set(r.offset!, r.id!);
    }
  };
  // 40 segments of 5 per partition, then the first 25 segments (offsets < 125) made two hours old.
  for (let s = 0; s < 40; s++)
    note(await b.writer.push(parts.flatMap((p) => Array.from({ length: 5 }, (_, j) => item('ret', p, `${p}-${s}-${j}`)))));
  for (const p of parts) await age(sql, 'ret', p, 125, 7200);

  // Retention (batches of 4: several steps per partition) while pushes keep arriving.
  const steps: number[] = [];
  const svc = await retention(t, 4, (_pid, _r, ms) => steps.push(ms));
  let pushing = true;
  const pusher = (async () => {
    for (let s = 40; pushing || s < 50; s++) note(await b.writer.push(parts.map((p) => item('ret', p, `${p}-${s}`))));
  })();
  const first = await svc.runOnce();
  const second = await svc.runOnce();
  pushing = false;
  await pusher;

  t.true(first.leader);
  t.is(first.segmentsRemoved, 3 * 25);
  t.is(first.messagesRemoved, 3 * 125);
  t.is(first.txnsRowsRemoved, 3 * 25);
  t.true(first.steps >= 3 * 7, `batches of 4 take several steps per partition (${first.steps})`);
  t.is(second.segmentsRemoved + second.txnsRowsRemoved, 0, 'a second pass finds nothing');
  for (const p of parts) {
    const pid = await partitionId(sql, 'ret', p);
    const st = await partitionState(sql, pid);
    t.is(st.logStart, 125);
    t.is(st.txnsStart, 125);
    t.is(st.firstSeg, 125);
    t.is(st.firstTxn, 125);
    // Nothing lost, nothing resurrected: what is stored is exactly what was accepted from offset 125 on.
    const expected = [...accepted.get(p)!].filter(([off]) => off >= 125).sort((a, z) => a[0] - z[0]);
    t.deepEqual(
      [...(await storedIds(sql, pid))].sort((a, z) => a[0] - z[0]),
      expected,
    );
    t.is(st.last, Math.max(...accepted.get(p)!.keys()));
  }
  const q = await getQueue(sql, 'ret');
  t.is(q.options.retentionSeconds, 3600);
  t.is(q.retention!.messagesRemoved, 3 * 125);
  t.is(q.retention!.segmentsRemoved, 3 * 25);
  t.true(q.retention!.bytesRemoved > 3 * 125 * 16, 'bytes counted');
  t.is(q.retention!.purgeLagSeconds, 0);
  t.true(q.retention!.oldestRetainedAgeSeconds < 3600);
  const text = await svc.metrics.render();
  t.regex(text, /^queen_retention_removed_messages_total\{queue="ret"\} 375$/m);
  t.regex(text, /^queen_retention_purged_txns_rows_total\{queue="ret"\} 75$/m);
  t.regex(text, /^queen_retention_purge_lag_seconds\{queue="ret"\} 0$/m);
  t.regex(text, /^queen_retention_oldest_retained_age_seconds\{queue="ret"\} \d/m);
  t.regex(text, /^queen_retention_leader 1$/m);
  t.log(`retention steps: ${steps.length}, longest ${Math.max(...steps).toFixed(1)} ms (batch 4)`);
});

test.serial(
  'the log_txns purge keeps what is younger than GREATEST(window, completedRetention, 900 s); segments stay without retentionSeconds',
  async (t) => {
    const { sql } = t.context;
    const b = await broker(t, false);
    await configureQueue(sql, 'floor', { dedupWindowSeconds: 60 }, 'merge');
    for (let s = 0; s < 6; s++) await b.writer.push([item('floor', 'p', `f-${s}`)]);
    // Offsets 0,1: 1000 s old (past the 900 s floor); 2,3: 600 s old (inside it); 4,5: new.
    await age(sql, 'floor', 'p', 2, 400);
    await age(sql, 'floor', 'p', 4, 600);
    const svc = await retention(t, 100);
    const r = await svc.runOnce();
    const pid = await partitionId(sql, 'floor', 'p');
    let st = await partitionState(sql, pid);
    t.is(st.txnsStart, 2);
    t.is(st.txnRows, 4);
    t.is(st.logStart, 0, 'retentionSeconds 0 keeps every segment');
    t.is(st.firstSeg, 0);
    t.is(r.segmentsRemoved, 0);
    // completedRetentionSeconds raises the horizon: nothing more goes even at 1000 s old.
    await configureQueue(sql, 'floor', { completedRetentionSeconds: 2000 }, 'merge');
    await age(sql, 'floor', 'p', 4, 400);
    await svc.runOnce();
    st = await partitionState(sql, pid);
    t.is(st.txnsStart, 2);
    await t.throwsAsync(configureQueue(sql, 'floor', { retentionSeconds: -1 }, 'merge'), {
      message: /options.retentionSeconds must be an integer from 0/,
    });
    await t.throwsAsync(configureQueue(sql, 'floor', { completedRetentionSeconds: 1.5 }, 'merge'), {
      message: /options.completedRetentionSeconds must be an integer/,
    });
    await configureQueue(sql, 'floor', { completedRetentionSeconds: null }, 'merge');
    await svc.runOnce();
    st = await partitionState(sql, pid);
    t.is(st.txnsStart, 4);
  },
);

test.serial(
  'after a purge, with the cache on: an old re-sent transactionId is new, one within the window is still a duplicate',
  async (t) => {
    const { sql } = t.context;
    const warm = await broker(t, true);
    await configureQueue(sql, 'dd', { dedupWindowSeconds: 3600 }, 'merge');
    const firsts = new Map<string, PushResult>();
    for (const txn of ['old-1', 'old-2', 'old-3', 'new-1', 'new-2', 'new-3'])
      firsts.set(txn, (await warm.writer.push([item('dd', 'p', txn)]))[0]!);
    // The three "old" ones are two hours old: past the window and the 900 s floor.
    await age(sql, 'dd', 'p', 3, 7200);
    const svc = await retention(t, 100);
    t.is((await svc.runOnce()).txnsRowsRemoved, 3);
    const pid = await partitionId(sql, 'dd', 'p');
    t.is((await partitionState(sql, pid)).txnsStart, 3);

    // The warm cache still holds the old hashes (it saw them arrive "now"): a
    // local hit only routes to the full probe, which finds nothing below txns_start.
    const [o1] = await warm.writer.push([item('dd', 'p', 'old-1')]);
    t.is(o1!.status, 'queued');
    t.not(o1!.id, firsts.get('old-1')!.id);
    const [n1] = await warm.writer.push([item('dd', 'p', 'new-1')]);
    t.is(n1!.status, 'duplicate');
    t.is(n1!.id, firsts.get('new-1')!.id);
    t.is(n1!.offset, firsts.get('new-1')!.offset);
    // A cold cache (another broker) hydrates after the purge and agrees.
    const cold = await broker(t, true);
    t.is((await cold.writer.push([item('dd', 'p', 'old-2')]))[0]!.status, 'queued');
    const [n2] = await cold.writer.push([item('dd', 'p', 'new-2')]);
    t.deepEqual([n2!.status, n2!.id], ['duplicate', firsts.get('new-2')!.id]);
    // And with no cache at all (-1, the reference verdict).
    const plain = await broker(t, false);
    t.is((await plain.writer.push([item('dd', 'p', 'old-3')]))[0]!.status, 'queued');
    t.is((await plain.writer.push([item('dd', 'p', 'new-3')]))[0]!.status, 'duplicate');

    // The purge is what decides once the window grows past the purged rows'
    // age: before it they would be duplicates, after it SQL's lower bound
    // (txns_start - 1) excludes them, with the cache on as with -1.
    await configureQueue(sql, 'dd2', { dedupWindowSeconds: 3600 }, 'merge');
    await warm.writer.push([item('dd2', 'p', 'x-1'), item('dd2', 'p', 'x-2')]);
    await warm.writer.push([item('dd2', 'p', 'y-1')]);
    await age(sql, 'dd2', 'p', 2, 7200);
    await svc.runOnce();
    await configureQueue(sql, 'dd2', { dedupWindowSeconds: 4 * 3600 }, 'merge');
    t.is((await warm.writer.push([item('dd2', 'p', 'x-1')]))[0]!.status, 'queued');
    t.is((await plain.writer.push([item('dd2', 'p', 'x-2')]))[0]!.status, 'queued');
    t.is((await warm.writer.push([item('dd2', 'p', 'y-1')]))[0]!.status, 'duplicate');
  },
);

test.serial('a duplicate of an original whose segment retention removed answers the all-zero id', async (t) => {
  const { sql } = t.context;
  const b = await broker(t, true);
  await configureQueue(sql, 'nil', { retentionSeconds: 60, dedupWindowSeconds: 3600 }, 'merge');
  await b.writer.push([item('nil', 'p', 'a')]);
  await b.writer.push([item('nil', 'p', 'b')]);
  await age(sql, 'nil', 'p', 1, 120, 'segments');
  const svc = await retention(t, 100);
  const r = await svc.runOnce();
  t.is(r.segmentsRemoved, 1);
  t.is(r.txnsRowsRemoved, 0, 'log_txns rows are in the window: kept');
  const [a] = await b.writer.push([item('nil', 'p', 'a')]);
  t.deepEqual([a!.status, a!.offset, a!.id], ['duplicate', 0, '00000000-0000-0000-0000-000000000000']);
  const pid = await partitionId(sql, 'nil', 'p');
  t.is((await partitionState(sql, pid)).logStart, 1);
});

test.serial('two brokers never run retention at once: one leader, the other takes over when it stops', async (t) => {
  const { sql } = t.context;
  const b = await broker(t, false);
  await configureQueue(sql, 'lead', { retentionSeconds: 60 }, 'merge');
  const running: string[] = [];
  let overlap = 0;
  const passes = new Map<string, number>();
  const mk = (name: string) =>
    new RetentionService({
      connectionString: t.context.db.url,
      intervalMs: 3_600_000,
      batchRows: 2,
      metrics: new MetricsRegistry(),
      onStep: () => {
        running.push(name);
      },
      onPass: () => void passes.set(name, (passes.get(name) ?? 0) + 1),
    });
  const s1 = mk('s1');
  const s2 = mk('s2');
  await s1.start();
  await s2.start();
  t.teardown(async () => {
    await s1.stop();
    await s2.stop();
  });
  const lockHolders = async () =>
    Number(
      (
        await sql.query(
          `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
          [RETENTION_LOCK_KEY.toString()],
        )
      ).rows[0].n,
    );
  // Both services' automatic first passes (at start) are over before anything is aged (see leading()).
  await waitFor('both automatic first passes', () => passes.get('s1') === 1 && passes.get('s2') === 1);
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 6; i++) await b.writer.push([item('lead', `p${i}`, `l-${round}-${i}`)]);
    for (let i = 0; i < 6; i++) await age(sql, 'lead', `p${i}`, 1_000_000, 120, 'segments');
    running.length = 0;
    const [r1, r2] = await Promise.all([s1.runOnce(), s2.runOnce()]);
    t.true(r1.leader !== r2.leader, 'exactly one leader per pass');
    const leaderName = r1.leader ? 's1' : 's2';
    t.true(
      running.every((n) => n === leaderName),
      'only the leader stepped',
    );
    t.is((r1.leader ? r2 : r1).steps, 0);
    t.is(r1.segmentsRemoved + r2.segmentsRemoved, 6);
    overlap += running.filter((n) => n !== leaderName).length;
    t.is(await lockHolders(), 1);
  }
  t.is(overlap, 0);
  const first = s1.isLeader ? s1 : s2;
  const other = first === s1 ? s2 : s1;
  await first.stop();
  for (let i = 0; i < 6; i++) await b.writer.push([item('lead', `p${i}`, `l-last-${i}`)]);
  for (let i = 0; i < 6; i++) await age(sql, 'lead', `p${i}`, 1_000_000, 120, 'segments');
  const r = await other.runOnce();
  t.true(r.leader, 'the follower takes over once the leader stopped');
  t.is(r.segmentsRemoved, 6);
  t.is(await lockHolders(), 1);
});

/**
 * A running retention service whose own first pass (at start) is over, so
 * every pass below is the test's own runOnce(). Waited for through onPass
 * (which also counts a pass that was fenced out), never with a runOnce():
 * one called right after start() runs BEFORE the automatic pass, whose timer
 * has not fired yet, and that pass then runs between the test's own passes.
 */
async function leading(
  t: ExecutionContext<Ctx>,
  opts: Omit<ConstructorParameters<typeof RetentionService>[0], 'connectionString' | 'intervalMs' | 'metrics'>,
) {
  const metrics = new MetricsRegistry();
  let passes = 0;
  const onPass = (s: PassSummary) => {
    passes++;
    opts.onPass?.(s);
  };
  const svc = new RetentionService({ connectionString: t.context.db.url, intervalMs: 3_600_000, metrics, ...opts, onPass });
  await svc.start();
  t.teardown(() => svc.stop());
  await waitFor('the first automatic pass', () => passes >= 1);
  return Object.assign(svc, { metrics });
}

/** `n` one-message segments in each partition, all made two minutes old (queue retentionSeconds 60: all past retention). */
async function agedSegments(t: ExecutionContext<Ctx>, queue: string, parts: string[], n: number): Promise<number[]> {
  const { sql } = t.context;
  const b = await broker(t, false);
  await configureQueue(sql, queue, { retentionSeconds: 60 }, 'merge');
  for (let s = 0; s < n; s++) await b.writer.push(parts.map((p) => item(queue, p, `${p}-${s}`)));
  for (const p of parts) await age(sql, queue, p, 1_000_000, 120, 'segments');
  const ids: number[] = [];
  for (const p of parts) ids.push(await partitionId(sql, queue, p));
  return ids;
}

/** Holds a partition row FOR UPDATE from a test session (as a long push would) until the returned release (or the test's end). */
async function holdPartitionRow(t: ExecutionContext<Ctx>, pid: number): Promise<() => Promise<void>> {
  const blocker = await t.context.sql.connect();
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await blocker.query('ROLLBACK');
    blocker.release();
  };
  t.teardown(release);
  await blocker.query('BEGIN');
  await blocker.query('SELECT 1 FROM queen.log_partitions WHERE id = $1 FOR UPDATE', [pid]);
  return release;
}

/** The backend pid of the one retention step session that waits for a lock. */
async function waitingStepSession(sql: pg.Pool): Promise<number> {
  return waitFor('a retention step waiting for a lock', async () => {
    const r = await sql.query(
      `SELECT pid FROM pg_stat_activity WHERE application_name = 'queen-retention-step' AND wait_event_type = 'Lock' AND datname = current_database()`,
    );
    return r.rows.length === 1 ? Number(r.rows[0].pid) : undefined;
  });
}

const stepSessions = async (sql: pg.Pool): Promise<number> =>
  Number(
    (
      await sql.query(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'queen-retention-step' AND datname = current_database()`,
      )
    ).rows[0].n,
  );

test.serial('steps on distinct partitions overlap: a partition whose row lock is held does not hold up the others', async (t) => {
  const { sql } = t.context;
  const began = new Set<number>();
  const svc = await leading(t, { batchRows: 2, concurrency: 3, onStepBegin: (pid) => began.add(pid) });
  const [held, ...others] = await agedSegments(t, 'conc', ['p0', 'p1', 'p2', 'p3'], 6);
  t.true(
    others.every((id) => id > held!),
    'the held partition is the first in ascending order (a serial pass would stop there)',
  );

  // A test session holds the first partition's row lock, as a long push would.
  const release = await holdPartitionRow(t, held!);
  let settled = false;
  const pass = svc.runOnce().finally(() => (settled = true));
  try {
    // The step on the held partition is waiting for its lock ...
    await waitingStepSession(sql);
    t.true(began.has(held!));
    // ... while the other partitions are cleaned completely.
    await waitFor('the other partitions cleaned while the lock is held', async () => {
      for (const pid of others) if ((await partitionState(sql, pid)).logStart !== 6) return false;
      return true;
    });
    t.false(settled, 'the pass is still waiting for the held partition');
    t.is((await partitionState(sql, held!)).logStart, 0, 'nothing of the held partition is gone yet');
  } finally {
    await release();
  }
  const sum = await pass;
  t.is((await partitionState(sql, held!)).logStart, 6, 'cleaned once its lock was released');
  t.is(sum.segmentsRemoved, 4 * 6);
  t.is(sum.failedSteps, 0);
  t.true(sum.peakConcurrentSteps >= 2, `steps overlapped (peak ${sum.peakConcurrentSteps})`);
});

/** A hot partition (p0, the first in ascending order: 30 segments) and 7 cold ones (2 segments each), all past retention. */
async function hotAndCold(t: ExecutionContext<Ctx>, queue: string): Promise<{ hot: number; cold: number[] }> {
  const ids = await agedSegments(
    t,
    queue,
    Array.from({ length: 8 }, (_, i) => `p${i}`),
    2,
  );
  const b = await broker(t, false);
  for (let s = 2; s < 30; s++) await b.writer.push([item(queue, 'p0', `p0-${s}`)]);
  await age(t.context.sql, queue, 'p0', 1_000_000, 120, 'segments');
  const [hot, ...cold] = ids as [number, ...number[]];
  t.true(
    cold.every((id) => id > hot),
    'the hot partition comes first (a serial pass would step it to the end before any other)',
  );
  return { hot, cold };
}

test.serial('one partition is never stepped twice at once while steps on distinct partitions overlap', async (t) => {
  const { sql } = t.context;
  const active = new Set<number>();
  const twice: number[] = [];
  const stepsOf = new Map<number, number>();
  let peak = 0;
  const svc = await leading(t, {
    batchRows: 1, // one segment per step: the hot partition needs 30 full batches, then an empty one
    concurrency: 4,
    onStepBegin: (pid) => {
      if (active.has(pid)) twice.push(pid);
      active.add(pid);
      peak = Math.max(peak, active.size);
    },
    onStep: (pid) => {
      active.delete(pid);
      stepsOf.set(pid, (stepsOf.get(pid) ?? 0) + 1);
    },
  });
  const { hot, cold } = await hotAndCold(t, 'twice');
  const sum = await svc.runOnce();

  t.deepEqual(twice, [], 'no partition had two steps in flight at once');
  t.is(stepsOf.get(hot), 31, 'the hot partition was revisited until its batch came back not full');
  for (const pid of cold) t.is(stepsOf.get(pid), 3);
  t.is(sum.segmentsRemoved, 30 + 7 * 2);
  t.is((await partitionState(sql, hot)).logStart, 30);
  for (const pid of cold) t.is((await partitionState(sql, pid)).logStart, 2);
  t.true(peak >= 2 && peak <= 4, `steps overlapped, never more than the concurrency (peak ${peak})`);
  t.is(sum.peakConcurrentSteps, peak);
  t.regex(await svc.metrics.render(), /^queen_retention_step_seconds_count 52$/m);
});

test.serial('a partition whose batch was full goes to the back: a hot partition does not starve the others', async (t) => {
  // One step session makes the order deterministic: round robin over the listed partitions.
  const order: number[] = [];
  const svc = await leading(t, { batchRows: 1, concurrency: 1, onStep: (pid) => order.push(pid) });
  const { hot, cold } = await hotAndCold(t, 'fair');
  await svc.runOnce();
  const round = [hot, ...cold];
  // Three rounds over all eight partitions (the cold ones are done in the third), then the hot one alone.
  t.deepEqual(order, [...round, ...round, ...round, ...Array.from({ length: 28 }, () => hot)]);
});

test.serial('a new leader steps only after every step session of an earlier leader is gone (the fence)', async (t) => {
  const { sql } = t.context;
  const [pid] = await agedSegments(t, 'fence', ['p'], 3);
  // A step session of a former leader, still alive: it holds the fence shared.
  const stale = await sql.connect();
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await stale.query('SELECT pg_advisory_unlock_shared($1::bigint)', [RETENTION_FENCE_KEY.toString()]);
    stale.release();
  };
  t.teardown(release);
  await stale.query('SELECT pg_advisory_lock_shared($1::bigint)', [RETENTION_FENCE_KEY.toString()]);
  // Its automatic pass at start is over before the test's own: queued between
  // them, it would find the fence free after the release and take the segments.
  const passes: PassSummary[] = [];
  const svc = await leading(t, { batchRows: 100, onPass: (s) => passes.push(s) });
  const fencedOut = await svc.runOnce();
  t.true(fencedOut.leader, 'it won the leader lock');
  t.is(fencedOut.steps, 0, 'but runs no step while the stale session holds the fence');
  t.deepEqual(
    passes.map((p) => [p.leader, p.steps]),
    [
      [true, 0],
      [true, 0],
    ],
    'the pass at start was fenced out as well',
  );
  t.is((await partitionState(sql, pid!)).logStart, 0);
  await release();
  const r = await svc.runOnce();
  t.is(passes.length, 3, "no pass but the test's own ran after the release");
  t.is(r.segmentsRemoved, 3);
  t.is((await partitionState(sql, pid!)).logStart, 3);
});

test.serial(
  'a step that fails with a retriable error is logged once, the pass goes on, the partition is cleaned at the next pass',
  async (t) => {
    const { sql } = t.context;
    const warnings: { msg: string; partitionId?: number }[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line)) });
    const svc = await leading(t, { batchRows: 2, concurrency: 2, logger });
    const [held, ...others] = await agedSegments(t, 'fail', ['p0', 'p1', 'p2'], 4);
    const release = await holdPartitionRow(t, held!);
    const pass = svc.runOnce();
    // The step waiting on the held partition loses its session (57P01: retriable).
    await sql.query('SELECT pg_terminate_backend($1)', [await waitingStepSession(sql)]);
    const sum = await pass;
    await release();

    t.is(sum.failedSteps, 1);
    t.is(sum.segmentsRemoved, 2 * 4, 'the other partitions were cleaned in the same pass');
    for (const pid of others) t.is((await partitionState(sql, pid)).logStart, 4);
    t.is((await partitionState(sql, held!)).logStart, 0);
    t.deepEqual(
      warnings.map((w) => [w.msg, w.partitionId]),
      [['retention step failed; the partition is retried at the next pass', held]],
      'logged once, where it was handled',
    );
    const text = await svc.metrics.render();
    t.regex(text, /^queen_retention_step_failures_total 1$/m);
    t.regex(text, /^queen_retention_failures_total 0$/m, 'the pass itself did not fail');

    const next = await svc.runOnce();
    t.is(next.segmentsRemoved, 4);
    t.is((await partitionState(sql, held!)).logStart, 4);
    t.is(await stepSessions(sql), 2, 'the closed step session was replaced, no more');
    await svc.stop();
    await waitFor('no step session left after stop', async () => (await stepSessions(sql)) === 0);
  },
);

/** Manual VACUUMs counted by PostgreSQL per log table (autovacuum counts apart, in autovacuum_count). */
async function manualVacuums(sql: pg.Pool): Promise<{ segments: number; txns: number }> {
  const c = await sql.connect();
  try {
    // The cumulative statistics are read through a per-transaction snapshot: take a fresh one.
    await c.query('SELECT pg_stat_clear_snapshot()');
    const r = await c.query(
      `SELECT relname, vacuum_count FROM pg_stat_user_tables WHERE schemaname = 'queen' AND relname IN ('log_segments', 'log_txns')`,
    );
    const n = (rel: string) => Number(r.rows.find((x) => x.relname === rel)?.vacuum_count);
    return { segments: n('log_segments'), txns: n('log_txns') };
  } finally {
    c.release();
  }
}

test.serial('the leader vacuums both log tables after a pass that removed rows, and only then', async (t) => {
  const { sql } = t.context;
  await agedSegments(t, 'rv-vacuum', ['a', 'b'], 3);
  const before = await manualVacuums(sql);
  const vacuums: number[] = [];
  // Its first pass (at start) removes the six aged segments and must vacuum.
  const svc = await leading(t, { batchRows: 100, onVacuum: (ms) => vacuums.push(ms) });
  await waitFor('the vacuum after the first pass', () => vacuums.length === 1);
  const after = await waitFor('PostgreSQL counting the vacuum of both tables', async () => {
    const v = await manualVacuums(sql);
    return v.segments > before.segments && v.txns > before.txns ? v : undefined;
  });
  t.is(after.segments, before.segments + 1);
  t.is(after.txns, before.txns + 1);
  // A pass that removed nothing does not vacuum (no dead rows of ours to reclaim).
  const s = await svc.runOnce();
  t.is(s.segmentsRemoved + s.txnsRowsRemoved, 0);
  t.deepEqual(await manualVacuums(sql), after);
  t.is(vacuums.length, 1);
  t.is(svc.metrics.counter('queen_retention_vacuum_failures_total', '').get(), 0);
});

test.serial('a vacuum never waits behind another one: a table whose vacuum lock is taken is skipped', async (t) => {
  const { sql } = t.context;
  await agedSegments(t, 'rv-skip', ['a'], 2);
  // What autovacuum (or a former leader's vacuum) holds while it works on log_segments.
  const holder = await sql.connect();
  t.teardown(async () => {
    await holder.query('ROLLBACK').catch(() => undefined);
    holder.release();
  });
  await holder.query('BEGIN');
  await holder.query('LOCK TABLE queen.log_segments IN SHARE UPDATE EXCLUSIVE MODE');
  const before = await manualVacuums(sql);
  const vacuums: number[] = [];
  await leading(t, { batchRows: 100, onVacuum: (ms) => vacuums.push(ms) });
  // It ends while the lock is still held: log_txns vacuumed, log_segments skipped.
  await waitFor('the vacuum to end while log_segments stays locked', () => vacuums.length === 1);
  const after = await waitFor('PostgreSQL counting the log_txns vacuum', async () => {
    const v = await manualVacuums(sql);
    return v.txns > before.txns ? v : undefined;
  });
  t.is(after.segments, before.segments);
  await holder.query('ROLLBACK');
});

test.serial('vacuumIntervalMs 0 leaves the log tables to autovacuum', async (t) => {
  const { sql } = t.context;
  await agedSegments(t, 'rv-novacuum', ['a'], 2);
  const before = await manualVacuums(sql);
  const svc = await leading(t, { batchRows: 100, vacuumIntervalMs: 0 });
  const s = await svc.runOnce();
  t.is(s.segmentsRemoved, 0, 'the first pass (at start) removed them');
  t.true(svc.metrics.counter('queen_retention_removed_segments_total', '').get('rv-novacuum') === 2);
  await svc.stop();
  t.deepEqual(await manualVacuums(sql), before);
});

test.serial('a role that does not own the log tables does not vacuum them, and says so once', async (t) => {
  const { sql } = t.context;
  // A fixed name (DDL takes no parameters, and names are never interpolated); roles are per cluster, and only this test uses it.
  const role = 'queen_test_not_owner';
  await sql.query('DROP ROLE IF EXISTS queen_test_not_owner');
  await sql.query('CREATE ROLE queen_test_not_owner NOLOGIN');
  t.teardown(() => sql.query('DROP ROLE IF EXISTS queen_test_not_owner').then(() => undefined));
  const c = await sql.connect();
  try {
    t.true(await canVacuumLogTables(c), 'the test role owns the tables');
    await c.query('SET ROLE queen_test_not_owner');
    t.false(await canVacuumLogTables(c));
  } finally {
    await c.query('RESET ROLE');
    c.release();
  }
  // The whole LogVacuum, connected as that role: it checks, logs once, and never runs VACUUM.
  const infos: { msg: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void infos.push(JSON.parse(line)) });
  const url = new URL(t.context.db.url);
  url.searchParams.set('options', `-c role=${role}`);
  const before = await manualVacuums(sql);
  const v = new LogVacuum({ connectionString: url.toString(), minIntervalMs: 1, metrics: new MetricsRegistry(), logger });
  t.teardown(() => v.stop());
  v.kick();
  await waitFor('the not-owner message', () => infos.some((l) => l.msg.includes('not their owner')));
  v.kick();
  await v.stop();
  t.is(infos.filter((l) => l.msg.includes('not their owner')).length, 1);
  t.deepEqual(await manualVacuums(sql), before);
});

test('VACUUM never truncates the log tables nor their TOAST tables (no ACCESS EXCLUSIVE behind pushes)', async (t) => {
  const r = await t.context.sql.query(
    `SELECT c.relname, c.reloptions AS own, tc.reloptions AS toast
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_class tc ON tc.oid = c.reltoastrelid
     WHERE n.nspname = 'queen' AND c.relname IN ('log_segments', 'log_txns') ORDER BY c.relname`,
  );
  t.deepEqual(
    r.rows.map((x) => x.relname),
    ['log_segments', 'log_txns'],
  );
  const off = (opts: string[] | null) => (opts ?? []).some((o) => /^vacuum_truncate=(off|false)$/.test(o));
  for (const row of r.rows) {
    t.true(off(row.own as string[] | null), `${row.relname}: ${String(row.own)}`);
    t.true(off(row.toast as string[] | null), `${row.relname} TOAST: ${String(row.toast)}`);
  }
});
