import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import pg from 'pg';
import { applyAcks, QUEUE_MODE_GROUP } from '../../src/engine/acks.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { popOnce, SegmentCache, type PopOutcome } from '../../src/engine/pop.js';
import { configureQueue } from '../../src/engine/queueConfig.js';
import { LogWriter, type PushItem } from '../../src/engine/writer.js';
import { RetentionService } from '../../src/retention/retentionService.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';

// Retention against readers (docs/retention.md, "Completed data" and "Why a
// reader never dereferences removed data"): completedRetentionSeconds removes
// only what every consumer group completed, and removal under concurrent
// pushes and pops loses nothing, resurrects nothing, and a cursor that
// retention overtook skips to log_start and says so.

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  engine: LogEngine;
  writer: LogWriter;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('retention_readers');
  const engine = new LogEngine({ connectionString: db.url, poolSize: 6, metrics: new MetricsRegistry() });
  await engine.start();
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0 });
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 3 }), engine, writer };
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.engine?.stop();
  await t.context.sql?.end();
  await t.context.db?.drop();
});

const item = (queue: string, partition: string, txn: string): PushItem => ({
  queue,
  partition,
  transactionId: txn,
  payload: Buffer.from(JSON.stringify(txn)),
});
const cache = new SegmentCache(1 << 20);

/**
 * A running retention service whose own first pass (at start) is over, so a
 * test's runOnce() never has that pass queued behind it: one called right
 * after start() runs before the automatic pass (its timer has not fired),
 * which would then run between the test's own passes (retention.test.ts,
 * leading()).
 */
async function retention(t: ExecutionContext<Ctx>, batchRows: number, intervalMs = 3_600_000) {
  let passes = 0;
  const svc = new RetentionService({
    connectionString: t.context.db.url,
    intervalMs,
    batchRows,
    metrics: new MetricsRegistry(),
    onPass: () => {
      passes++;
    },
  });
  await svc.start();
  t.teardown(() => svc.stop());
  await waitFor('the first automatic pass', () => passes >= 1);
  return svc;
}

async function pop(t: ExecutionContext<Ctx>, queue: string, group: string, batch: number, partition?: string): Promise<PopOutcome> {
  return popOnce(
    t.context.engine.pool,
    { queue, partition, consumerGroup: group, batch, subscriptionMode: 'all', autoAck: false },
    cache,
    64,
  );
}

/** Acks every message of a pop as completed, in one transaction. */
async function ackAll(t: ExecutionContext<Ctx>, group: string, r: PopOutcome): Promise<void> {
  if (r.messages.length === 0) return;
  const c = await t.context.engine.pool.connect();
  try {
    await c.query('BEGIN');
    const { outcomes } = await applyAcks(
      c,
      r.messages.map((m) => ({
        consumerGroup: group,
        status: 'completed' as const,
        partitionId: m.partitionId,
        transactionId: m.transactionId,
        leaseId: r.leaseId ?? undefined,
      })),
    );
    await c.query('COMMIT');
    for (const o of outcomes) if (o.result !== 'acked') throw new Error(`ack answered ${o.result}`);
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    c.release();
  }
}

async function logStart(sql: pg.Pool, queue: string, partition: string): Promise<{ logStart: number; last: number; segments: number }> {
  const r = await sql.query(
    `SELECT lp.log_start, lp.last_offset, (SELECT count(*) FROM queen.log_segments s WHERE s.partition_id = lp.id) AS n
     FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 AND lp.name = $2`,
    [queue, partition],
  );
  return { logStart: Number(r.rows[0].log_start), last: Number(r.rows[0].last_offset), segments: Number(r.rows[0].n) };
}

/** Ages a queue's segments (and log_txns rows) below `below` by `seconds`: time travel for stored data. */
async function age(sql: pg.Pool, queue: string, partition: string | null, below: number, seconds: number): Promise<void> {
  for (const table of ['log_segments', 'log_txns']) {
    await sql.query(
      `UPDATE queen.${table} x SET created_at = x.created_at - make_interval(secs => $4)
       FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
       WHERE x.partition_id = lp.id AND q.name = $1 AND ($2::text IS NULL OR lp.name = $2) AND x.base_offset < $3`,
      [queue, partition, below, seconds],
    );
  }
}

test.serial(
  'completedRetentionSeconds removes only what every consumer group completed; an unread partition keeps everything',
  async (t) => {
    const { sql, writer } = t.context;
    await configureQueue(sql, 'done', { completedRetentionSeconds: 60 }, 'merge');
    // 10 segments of 3 messages in each of p0, p1, p2.
    for (let s = 0; s < 10; s++)
      await writer.push(['p0', 'p1', 'p2'].flatMap((p) => [0, 1, 2].map((j) => item('done', p, `${p}-${s}-${j}`))));
    const svc = await retention(t, 4);

    // Nobody has read anything: old as it is, nothing is completed.
    await age(sql, 'done', null, 1_000_000, 120);
    t.is((await svc.runOnce()).segmentsRemoved, 0, 'no cursor at all: nothing completed');

    // Group "a" reads p0 to offset 11 and p1 entirely; queue mode reads p0 to offset 5 only.
    await ackAll(t, 'a', await pop(t, 'done', 'a', 12, 'p0'));
    await ackAll(t, 'a', await pop(t, 'done', 'a', 30, 'p1'));
    const qm = await pop(t, 'done', QUEUE_MODE_GROUP, 6, 'p0');
    t.deepEqual(
      qm.messages.map((m) => m.offset),
      [0, 1, 2, 3, 4, 5],
    );
    await ackAll(t, QUEUE_MODE_GROUP, qm);
    let r = await svc.runOnce();
    // p0: both groups completed offsets 0..5 (segments 0, 1); p1: queue mode never read it; p2: nobody did.
    t.is(r.segmentsRemoved, 2);
    t.deepEqual(await logStart(sql, 'done', 'p0'), { logStart: 6, last: 29, segments: 8 });
    t.deepEqual(
      await logStart(sql, 'done', 'p1'),
      { logStart: 0, last: 29, segments: 10 },
      'a group that never read p1 has completed nothing there',
    );
    t.deepEqual(await logStart(sql, 'done', 'p2'), { logStart: 0, last: 29, segments: 10 });

    // Queue mode catches up to 11; offsets 9..11 are completed by both but younger than the limit.
    await ackAll(t, QUEUE_MODE_GROUP, await pop(t, 'done', QUEUE_MODE_GROUP, 6, 'p0'));
    await sql.query(
      `UPDATE queen.log_segments s SET created_at = now() FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
     WHERE s.partition_id = lp.id AND q.name = 'done' AND lp.name = 'p0' AND s.base_offset >= 9`,
    );
    r = await svc.runOnce();
    t.is(r.segmentsRemoved, 1);
    t.is((await logStart(sql, 'done', 'p0')).logStart, 9, 'completed but younger than completedRetentionSeconds: kept');

    // Neither group skipped anything: completed removal never overtakes a cursor.
    const a = await pop(t, 'done', 'a', 3, 'p0');
    const q = await pop(t, 'done', QUEUE_MODE_GROUP, 3, 'p0');
    t.deepEqual([a.skipped, a.messages.map((m) => m.offset)], [0, [12, 13, 14]]);
    t.deepEqual([q.skipped, q.messages.map((m) => m.offset)], [0, [12, 13, 14]]);

    // A new group only ever sees what is retained, and nothing past its limit goes with completedRetentionSeconds 0.
    const fresh = await pop(t, 'done', 'fresh', 100, 'p0');
    t.is(fresh.messages[0]!.offset, 9);
    await configureQueue(sql, 'done', { completedRetentionSeconds: 0 }, 'merge');
    await ackAll(t, 'fresh', fresh);
    await ackAll(t, 'a', a);
    await ackAll(t, QUEUE_MODE_GROUP, q);
    await age(sql, 'done', null, 1_000_000, 120);
    t.is((await svc.runOnce()).segmentsRemoved, 0, 'completedRetentionSeconds 0 keeps completed data');
  },
);

test.serial(
  'under concurrent pushes and pops, completed removal loses nothing, resurrects nothing and never overtakes a cursor',
  async (t) => {
    const { sql, writer } = t.context;
    const parts = ['p0', 'p1', 'p2', 'p3'];
    await configureQueue(sql, 'live', { completedRetentionSeconds: 1 }, 'merge');
    // Every partition exists and both groups have a cursor on each before the race starts.
    await writer.push(parts.map((p) => item('live', p, `${p}-seed`)));
    const groups = ['g1', QUEUE_MODE_GROUP];
    const got = new Map<string, Map<string, number>>(groups.map((g) => [g, new Map()]));
    const record = (g: string, r: PopOutcome) => {
      t.is(r.skipped, 0, `${g}: completed removal never skips a cursor`);
      for (const m of r.messages) got.get(g)!.set(m.transactionId, (got.get(g)!.get(m.transactionId) ?? 0) + 1);
    };
    for (const g of groups)
      for (const p of parts) {
        const r = await pop(t, 'live', g, 1, p);
        record(g, r);
        await ackAll(t, g, r);
      }

    const steps: number[] = [];
    const svc = new RetentionService({
      connectionString: t.context.db.url,
      intervalMs: 20,
      batchRows: 4,
      metrics: new MetricsRegistry(),
      onStep: (_p, res) => steps.push(res.segmentsRemoved),
    });
    await svc.start();
    t.teardown(() => svc.stop());

    const pushed = new Set<string>(parts.map((p) => `${p}-seed`));
    let pushing = true;
    let violations = 0;
    const pusher = (async () => {
      for (let s = 0; s < 150; s++) {
        const items = parts.flatMap((p) => [0, 1].map((j) => item('live', p, `${p}-${s}-${j}`)));
        for (const i of await writer.push(items)) if (i.status === 'queued') pushed.add(i.transactionId!);
      }
      pushing = false;
    })();
    // The invariant, checked in one snapshot while everything runs: log_start never passes a cursor.
    const checker = (async () => {
      while (pushing) {
        const r = await sql.query(
          `SELECT count(*) AS bad FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id AND q.name = 'live'
         WHERE lp.log_start > 0 AND lp.log_start > 1 + coalesce((SELECT min(c.committed_offset) FROM queen.log_cursors c WHERE c.partition_id = lp.id), -1)`,
        );
        violations += Number(r.rows[0].bad);
      }
    })();
    const deadline = Date.now() + 60_000;
    const consumer = async (g: string) => {
      for (;;) {
        if (Date.now() > deadline) throw new Error(`${g}: still missing messages after 60 s`);
        const r = await pop(t, 'live', g, 5);
        record(g, r);
        await ackAll(t, g, r);
        if (r.messages.length === 0 && !pushing && got.get(g)!.size === pushed.size) return;
      }
    };
    await Promise.all([pusher, checker, ...groups.map(consumer)]);

    t.is(violations, 0, 'log_start never passed a cursor');
    for (const g of groups) {
      const seen = got.get(g)!;
      t.is(seen.size, pushed.size, `${g}: every pushed message delivered (nothing lost)`);
      t.true(
        [...seen.values()].every((n) => n === 1),
        `${g}: each delivered once`,
      );
    }
    // Everything was completed by both groups: it all goes once it is a second old.
    await waitFor('retention to remove every completed segment', async () => {
      for (const p of parts) {
        const st = await logStart(sql, 'live', p);
        if (st.segments !== 0 || st.logStart !== st.last + 1) return false;
      }
      return true;
    });
    t.true(steps.filter((n) => n > 0).length > 1, 'removal happened in several steps');
    // Nothing resurrected: a new group with subscriptionMode all finds nothing, the old groups too.
    t.is((await pop(t, 'live', 'late', 100)).messages.length, 0);
    for (const g of groups) t.is((await pop(t, 'live', g, 100)).messages.length, 0);
  },
);

test.serial('a cursor that age-based retention overtook skips to log_start and says so, under concurrent pushes and pops', async (t) => {
  const { sql, writer } = t.context;
  const parts = ['p0', 'p1', 'p2'];
  await configureQueue(sql, 'aged', { retentionSeconds: 60 }, 'merge');
  const pushed = new Map<string, number>();
  const note = async (items: PushItem[]) => {
    for (const r of await writer.push(items)) pushed.set(`${r.partition}:${r.offset}`, 1);
  };
  for (let s = 0; s < 20; s++) await note(parts.map((p) => item('aged', p, `${p}-${s}`)));
  // The consumer reads one message of each partition, then falls behind.
  const delivered = new Set<string>();
  let skipped = 0;
  const take = async (r: PopOutcome) => {
    skipped += r.skipped;
    for (const m of r.messages) {
      const k = `${m.partition}:${m.offset}`;
      t.false(delivered.has(k), `${k} delivered once`);
      delivered.add(k);
    }
    await ackAll(t, 'slow', r);
  };
  for (const p of parts) await take(await pop(t, 'aged', 'slow', 1, p));
  // Offsets below 10 pass their retention while the consumer is at 1.
  await age(sql, 'aged', null, 10, 120);
  const svc = await retention(t, 3, 20);
  await waitFor('the aged prefix removed', async () => {
    for (const p of parts) if ((await logStart(sql, 'aged', p)).logStart !== 10) return false;
    return true;
  });
  // The next pop of each partition reports the 9 offsets it could not deliver.
  const first = await pop(t, 'aged', 'slow', 2, 'p0');
  t.is(first.skipped, 9, 'the pop answer says how many offsets retention removed under the cursor');
  t.deepEqual(
    first.messages.map((m) => m.offset),
    [10, 11],
  );
  await take(first);

  // Then pushes, pops and removal race: every offset ends up delivered or reported skipped, exactly once.
  let pushing = true;
  const pusher = (async () => {
    for (let s = 20; s < 120; s++) {
      await note(parts.map((p) => item('aged', p, `${p}-${s}`)));
      if (s % 20 === 0) for (const p of parts) await age(sql, 'aged', p, (await logStart(sql, 'aged', p)).last - 5, 120);
    }
    pushing = false;
  })();
  const deadline = Date.now() + 60_000;
  const consumer = (async () => {
    for (;;) {
      if (Date.now() > deadline) throw new Error(`offsets neither delivered nor reported skipped after 60 s`);
      const r = await pop(t, 'aged', 'slow', 4);
      await take(r);
      if (r.messages.length === 0 && r.skipped === 0 && !pushing && delivered.size + skipped === pushed.size) return;
    }
  })();
  await Promise.all([pusher, consumer]);
  await svc.runOnce();
  t.is(delivered.size + skipped, pushed.size, 'every offset delivered or reported skipped (nothing lost silently, nothing twice)');
  for (const k of delivered) t.true(pushed.has(k));
  t.true(skipped >= 27, `skips were reported (${skipped})`);
  const stored = await sql.query(
    `SELECT count(*) AS n FROM queen.log_segments s JOIN queen.log_partitions lp ON lp.id = s.partition_id JOIN queen.queues q ON q.id = lp.queue_id
     WHERE q.name = 'aged' AND s.base_offset < lp.log_start`,
  );
  t.is(Number(stored.rows[0].n), 0, 'nothing below log_start is stored');
});

test.serial(
  'a step waits for a pop or ack that holds one of the partition cursor rows, so no pop leases what a step removes',
  async (t) => {
    const { sql, writer, db } = t.context;
    await configureQueue(sql, 'ser', { retentionSeconds: 60 }, 'merge');
    for (let s = 0; s < 3; s++) await writer.push([item('ser', 'p', `s-${s}`)]);
    const first = await pop(t, 'ser', 'g', 1, 'p');
    await ackAll(t, 'g', first);
    // The service's own first pass (at start) is over before anything is aged, so no pass but ours runs below.
    const metrics = new MetricsRegistry();
    const svc = new RetentionService({ connectionString: db.url, intervalMs: 3_600_000, batchRows: 100, metrics });
    await svc.start();
    t.teardown(() => svc.stop());
    await waitFor('the first automatic pass', () => metrics.counter('queen_retention_passes_total', '').get() >= 1);
    await age(sql, 'ser', 'p', 1_000_000, 120);
    // A session holding the cursor row the way a pop does (FOR UPDATE, until its transaction ends).
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM queen.log_cursors WHERE partition_id = $1 FOR UPDATE', [first.partitionId]);
      const pass = svc.runOnce();
      await waitFor(
        'the retention step to wait for the cursor row',
        async () =>
          Number(
            (
              await sql.query(
                `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'queen-retention-step' AND datname = current_database() AND wait_event_type = 'Lock'`,
              )
            ).rows[0].n,
          ) === 1,
      );
      t.is((await logStart(sql, 'ser', 'p')).logStart, 0, 'nothing removed while the pop holds the cursor');
      await holder.query('COMMIT');
      t.is((await pass).segmentsRemoved, 3);
      t.is((await logStart(sql, 'ser', 'p')).logStart, 3);
    } finally {
      await holder.end();
    }
    const after = await pop(t, 'ser', 'g', 10, 'p');
    t.deepEqual([after.skipped, after.messages.length], [2, 0], 'the pop after the step skips what it removed and says so');
  },
);

test.serial(
  'the leader exports each group lag per queue: retained offsets above its cursor, never-popped partitions included',
  async (t) => {
    const { writer } = t.context;
    for (let s = 0; s < 5; s++) await writer.push([item('lagq', 'p0', `p0-${s}`)]);
    for (let s = 0; s < 3; s++) await writer.push([item('lagq', 'p1', `p1-${s}`)]);
    // a: two of p0 read and acked; p1 never popped (subscription all: all of it is lag).
    await ackAll(t, 'a', await pop(t, 'lagq', 'a', 2, 'p0'));
    // b: one of p0 leased, not acked (a lease is not progress).
    t.is((await pop(t, 'lagq', 'b', 1, 'p0')).messages.length, 1);
    const metrics = new MetricsRegistry();
    const svc = new RetentionService({ connectionString: t.context.db.url, intervalMs: 3_600_000, batchRows: 100, metrics });
    await svc.start();
    t.teardown(() => svc.stop());
    await svc.runOnce();
    const text = await metrics.render();
    t.regex(text, /^queen_consumer_lag_messages\{queue="lagq",consumer_group="a"\} 6$/m);
    t.regex(text, /^queen_consumer_lag_messages\{queue="lagq",consumer_group="b"\} 8$/m);
    t.regex(text, /^queen_consumer_partitions_behind\{queue="lagq",consumer_group="a"\} 2$/m);
    // a reads the rest of p0: one partition behind, three messages.
    await ackAll(t, 'a', await pop(t, 'lagq', 'a', 10, 'p0'));
    await svc.runOnce();
    const after = await metrics.render();
    t.regex(after, /^queen_consumer_lag_messages\{queue="lagq",consumer_group="a"\} 3$/m);
    t.regex(after, /^queen_consumer_partitions_behind\{queue="lagq",consumer_group="a"\} 1$/m);
  },
);
