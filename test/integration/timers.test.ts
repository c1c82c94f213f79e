import { fileURLToPath } from 'node:url';
import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import type pg from 'pg';
import { run } from '../../src/cli/run.js';
import { DEFAULTS } from '../../src/config.js';
import { QueenHttpError } from '../../src/client/index.js';
import { unpackSegment } from '../../src/engine/frames.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { TimerSweeper } from '../../src/timers/timerSweeper.js';
import { uuidToString } from '../../src/util/uuidv7.js';
import { tuplesRead } from '../helpers/tuplesRead.js';
import { startHttpStack, type HttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';
import { ServiceProcess } from '../helpers/serviceProcess.js';

const CHILD = fileURLToPath(new URL('../helpers/timerFireChild.js', import.meta.url));

interface Ctx {
  stack: HttpStack;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  t.context = { stack: await startHttpStack('timers') };
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.stack?.stop();
});

/** A sweeper that fires only when told (sweepOnce), stopped with the test. */
async function sweeper(t: ExecutionContext<Ctx>, opts: { batch?: number; loop?: boolean; pollMs?: number } = {}) {
  const s = new TimerSweeper({
    pool: t.context.stack.engine.pool,
    pollMs: opts.pollMs ?? 3_600_000,
    batch: opts.batch ?? 1000,
    metrics: new MetricsRegistry(),
    loop: opts.loop ?? false,
  });
  await s.start();
  t.teardown(() => s.stop());
  return s;
}

/** Every message of a queue in the log: id -> {transactionId, payload, count of occurrences}. */
async function logOf(sql: pg.Pool, queue: string): Promise<Map<string, { txn: string; payload: string; n: number }>> {
  const r = await sql.query(
    `SELECT s.blob FROM queen.log_segments s JOIN queen.log_partitions lp ON lp.id = s.partition_id JOIN queen.queues q ON q.id = lp.queue_id
     WHERE q.name = $1 ORDER BY s.partition_id, s.base_offset`,
    [queue],
  );
  const out = new Map<string, { txn: string; payload: string; n: number }>();
  for (const row of r.rows) {
    for (const f of unpackSegment(row.blob)) {
      const id = uuidToString(f.id);
      const prev = out.get(id);
      out.set(id, { txn: f.transactionId, payload: f.payload.toString(), n: (prev?.n ?? 0) + 1 });
    }
  }
  return out;
}

const pending = async (sql: pg.Pool, queue: string) =>
  Number(
    (await sql.query('SELECT count(*) AS n FROM queen.timers t JOIN queen.queues q ON q.id = t.queue_id WHERE q.name = $1', [queue]))
      .rows[0].n,
  );

test.serial(
  'schedule, peek, reschedule, fire with the promised id and transactionId (no probe), then absent; re-scheduling after the fire makes a second message',
  async (t) => {
    const { client, sql } = t.context.stack;
    const s = await sweeper(t);
    const a = await client.timer('tq').key('order-1').partition('c-42').delay('1h').payload({ n: 1 }).schedule();
    t.is(a.status, 'scheduled');
    t.regex(a.messageId, /^[0-9a-f-]{36}$/);
    t.is(a.transactionId, `timer:${a.messageId}`);
    const peek = await client.timer('tq').key('order-1').peek();
    t.like(peek, {
      status: 'pending',
      partition: 'c-42',
      messageId: a.messageId,
      transactionId: a.transactionId,
      payload: { n: 1 },
      attempts: 0,
    });
    t.deepEqual(await s.sweepOnce(), [], 'not due: nothing fires');

    // Rescheduling keeps the promised id; it is due now.
    const b = await client
      .timer('tq')
      .key('order-1')
      .partition('c-42')
      .at(new Date(Date.now() - 1000))
      .payload({ n: 2 })
      .schedule();
    t.deepEqual(b, { status: 'rescheduled', messageId: a.messageId, transactionId: a.transactionId });
    const fired = await s.sweepOnce();
    t.is(fired.length, 1);
    t.false(fired[0]!.probed, "the fire pushes with the partition's own marker: no probe");
    const log = await logOf(sql, 'tq');
    t.deepEqual(log.get(a.messageId), { txn: a.transactionId, payload: '{"n":2}', n: 1 });
    t.is(await client.timer('tq').key('order-1').peek(), null);
    t.is(await client.timer('tq').key('order-1').cancel(), 'absent', 'absent = no longer pending (here: delivered)');

    // The documented consequence: the same key scheduled again after its fire committed is a new timer and a second message.
    const c = await client
      .timer('tq')
      .key('order-1')
      .partition('c-42')
      .delay(0)
      .transactionId(a.transactionId)
      .payload({ n: 3 })
      .schedule();
    t.is(c.status, 'scheduled');
    t.not(c.messageId, a.messageId);
    await s.sweepOnce();
    const log2 = await logOf(sql, 'tq');
    t.is(log2.size, 2, 'a second message, even with the same transactionId: the fire does not probe');
    t.is(log2.get(c.messageId)!.txn, a.transactionId);

    // Cancel of a pending timer.
    await client.timer('tq').key('later').delay('2d').payload(null).schedule();
    t.is(await client.timer('tq').key('later').cancel(), 'cancelled');
    t.is(await client.timer('tq').key('later').cancel(), 'absent');
    t.is((await client.timer('tq').list()).timers.length, 0);
  },
);

test.serial('bad schedules get a clear 400 and store nothing', async (t) => {
  const { client, sql } = t.context.stack;
  const bad = async (f: () => Promise<unknown>, field: string) => {
    const err = await t.throwsAsync(f, { instanceOf: QueenHttpError });
    t.is(err.status, 400);
    t.is(err.field, field);
  };
  await bad(() => client.timer('bq').key('k').delay('91d').payload(1).schedule(), 'delayMs');
  await bad(
    () =>
      client
        .timer('bq')
        .key('k')
        .at(Date.now() + 91 * 86_400_000)
        .payload(1)
        .schedule(),
    'deliverAt',
  );
  await bad(() => client.timer('bad queue').key('k').delay(1).payload(1).schedule(), 'queue');
  await bad(() => client.timer('bq').key('k\u0001').delay(1).payload(1).schedule(), 'key');
  t.is(await pending(sql, 'bq'), 0);
});

test.serial('timers fire exactly once across a kill -9 of the firing broker between claim and commit (20 runs)', async (t) => {
  const { client, sql, db } = t.context.stack;
  const s = await sweeper(t);
  const promised = new Map<string, string>();
  for (let run = 0; run < 20; run++) {
    for (let i = 0; i < 5; i++) {
      const r = await client
        .timer('kq')
        .key(`r${run}-${i}`)
        .partition(`p${i % 2}`)
        .delay(0)
        .payload({ run, i })
        .schedule();
      promised.set(r.messageId, r.transactionId);
    }
    const child = new ServiceProcess({}, CHILD, [db.url]);
    try {
      await child.ready('claimed', 30_000);
      t.is(child.lines.find((l) => l.msg === 'claimed')!.n, 5, 'the child claimed and appended all five, uncommitted');
      child.kill('SIGKILL');
      await child.exited;
    } finally {
      await child.ensureDead();
    }
    // The killed transaction rolls back when PostgreSQL sees the connection go; then the rows are due again here.
    await waitFor(`run ${run}: the survivors fire`, async () => {
      await s.sweepOnce();
      return (await pending(sql, 'kq')) === 0;
    });
  }
  const log = await logOf(sql, 'kq');
  t.is(log.size, 100);
  for (const [id, txn] of promised)
    t.deepEqual([log.get(id)?.txn, log.get(id)?.n], [txn, 1], `timer ${id} fired exactly once with its promised transactionId`);
});

test.serial('cancel racing fire ends in exactly one of cancelled / delivered, for every timer', async (t) => {
  const { client, sql } = t.context.stack;
  const s = await sweeper(t, { batch: 3 });
  const ids = new Map<string, string>();
  for (let i = 0; i < 60; i++)
    ids.set(
      `k${i}`,
      (
        await client
          .timer('cq')
          .key(`k${i}`)
          .partition(`p${i % 3}`)
          .delay(0)
          .payload(i)
          .schedule()
      ).messageId,
    );
  const keys = [...ids.keys()].sort(() => Math.random() - 0.5);
  const answers = new Map<string, string>();
  const firing = (async () => {
    while ((await pending(sql, 'cq')) > 0) await s.sweepOnce();
  })();
  await Promise.all(
    [0, 1, 2, 3].map(async (w) => {
      for (let i = w; i < keys.length; i += 4) answers.set(keys[i]!, await client.timer('cq').key(keys[i]!).cancel());
    }),
  );
  await firing;
  const log = await logOf(sql, 'cq');
  let cancelled = 0;
  for (const [key, id] of ids) {
    const delivered = log.get(id)?.n ?? 0;
    if (answers.get(key) === 'cancelled') {
      cancelled++;
      t.is(delivered, 0, `${key}: cancelled, so never delivered`);
    } else {
      t.is(answers.get(key), 'absent');
      t.is(delivered, 1, `${key}: absent, because it was delivered exactly once`);
    }
  }
  t.is(log.size + cancelled, 60);
  t.log(`cancelled ${cancelled}, delivered ${log.size}`);
});

test.serial('10 000 timers due in the same second all fire, each once (default poll and batch)', async (t) => {
  const { client, sql } = t.context.stack;
  // Provision the queue's partitions through the API, then stage 10 000 rows
  // due in the same (next whole) second straight in SQL.
  for (let p = 0; p < 10; p++) await client.timer('bulk').key(`seed-${p}`).partition(`p${p}`).delay('1d').payload(p).schedule();
  await sql.query(`DELETE FROM queen.timers`);
  const staged = await sql.query(
    `INSERT INTO queen.timers (queue_id, timer_key, partition_id, deliver_at, transaction_id, message_id, payload)
     SELECT lp.queue_id, 'b-' || g, lp.id, date_trunc('second', now()) + interval '1 second', 'bulk-' || g, gen_random_uuid(), convert_to(g::text, 'UTF8')
     FROM generate_series(0, 9999) g
     JOIN queen.log_partitions lp ON lp.name = 'p' || (g % 10)
     JOIN queen.queues q ON q.id = lp.queue_id AND q.name = 'bulk'
     RETURNING message_id, deliver_at`,
  );
  t.is(staged.rowCount, 10_000);
  const due = (staged.rows[0].deliver_at as Date).getTime();
  t.true(
    staged.rows.every((r) => (r.deliver_at as Date).getTime() === due),
    'all due in the same second',
  );
  // The sweeper as a broker runs it by default (QUEEN_TIMER_POLL_MS, QUEEN_TIMER_BATCH).
  await sweeper(t, { loop: true, pollMs: DEFAULTS.timerPollMs, batch: DEFAULTS.timerBatch });
  // A condition wait. How soon after its second the burst is in the log is
  // a wall-clock number, so `make bench` measures it (timer-burst, <= 5 s);
  // the deadline here only bounds a hung sweeper.
  await waitFor('every bulk timer to fire', async () => (await pending(sql, 'bulk')) === 0, 120_000, 50);
  const last = Date.now();
  const log = await logOf(sql, 'bulk');
  t.is(log.size, 10_000);
  for (const row of staged.rows) t.is(log.get(row.message_id)?.n, 1);
  t.log(
    `10 000 timers fired; the last seen ${last - due} ms after their due second (batch ${DEFAULTS.timerBatch}, poll ${DEFAULTS.timerPollMs} ms)`,
  );
});

/** What one statement read from queen.timers, and how many rows it returned. */
async function timersTuplesRead(sql: pg.Pool, statement: string, values: unknown[]): Promise<{ rows: number; tuplesRead: number }> {
  const r = await tuplesRead(sql, 'queen.timers', statement, values);
  return { rows: r.rows.length, tuplesRead: r.tuplesRead };
}

/** What one claim of up to `limit` timers read, and how many it claimed. */
async function claimReads(sql: pg.Pool, limit: number): Promise<{ claimed: number; tuplesRead: number }> {
  const r = await timersTuplesRead(sql, 'SELECT * FROM queen.timer_claim_v1($1)', [limit]);
  return { claimed: r.rows, tuplesRead: r.tuplesRead };
}

test.serial('a claim reads about its batch and the due timers, never every pending timer, whatever the statistics say', async (t) => {
  const { client, sql } = t.context.stack;
  for (let p = 0; p < 4; p++) await client.timer('reads').key(`seed-${p}`).partition(`r${p}`).delay('1d').payload(p).schedule();
  await sql.query(`DELETE FROM queen.timers`);
  // Statistics taken while the table is empty, kept that way while it fills
  // (as after a quiet spell): the planner believes in a tiny table.
  await sql.query(`ALTER TABLE queen.timers SET (autovacuum_enabled = off)`);
  t.teardown(() => sql.query(`ALTER TABLE queen.timers RESET (autovacuum_enabled)`));
  await sql.query(`ANALYZE queen.timers`);
  const stage = (n: number, prefix: string, due: string) =>
    sql.query(
      `INSERT INTO queen.timers (queue_id, timer_key, partition_id, deliver_at, transaction_id, message_id, payload)
       SELECT lp.queue_id, $2 || g, lp.id, now() + $3::interval, $2 || g, gen_random_uuid(), convert_to('x', 'UTF8')
       FROM generate_series(1, $1::integer) g
       JOIN queen.log_partitions lp ON lp.name = 'r' || (g % 4)
       JOIN queen.queues q ON q.id = lp.queue_id AND q.name = 'reads'`,
      [n, prefix, due],
    );
  const later = 20_000;
  const dueNow = 5_000;
  await stage(later, 'later-', '1 day');
  await stage(dueNow, 'due-', '-1 second');
  const stale = await claimReads(sql, 1000);
  t.is(stale.claimed, 1000);
  // One pass over the table at most (a join back on the key per claimed row
  // would read the table once per row: ~25 million tuples here).
  t.true(stale.tuplesRead <= 2 * (later + dueNow), `stale statistics: ${stale.tuplesRead} tuples read to claim 1000`);

  // With statistics, an idle sweep (nothing due) reads nothing: the due bound
  // is the index scan's bound, not a filter over every pending timer.
  await sql.query(`DELETE FROM queen.timers WHERE timer_key LIKE 'due-%'`);
  await sql.query(`VACUUM ANALYZE queen.timers`);
  const idle = await claimReads(sql, 1000);
  t.is(idle.claimed, 0);
  t.true(idle.tuplesRead <= 10, `idle sweep over ${later} later timers read ${idle.tuplesRead} tuples`);
  await stage(dueNow, 'due2-', '-1 second');
  await sql.query(`ANALYZE queen.timers`);
  const fresh = await claimReads(sql, 1000);
  t.is(fresh.claimed, 1000);
  t.true(fresh.tuplesRead <= 3 * 1000, `fresh statistics: ${fresh.tuplesRead} tuples read to claim 1000`);
  t.log(`tuples read: stale ${stale.tuplesRead}, idle ${idle.tuplesRead}, fresh ${fresh.tuplesRead}`);
  await sql.query(`DELETE FROM queen.timers`);
});

test.serial('a fire that rolls back records attempts and its error on exactly its rows, reading only due timers', async (t) => {
  const { client, sql } = t.context.stack;
  for (let p = 0; p < 2; p++) await client.timer('fails').key(`seed-${p}`).partition(`f${p}`).delay('1d').payload(p).schedule();
  await sql.query(`DELETE FROM queen.timers`);
  const later = 20_000;
  await sql.query(
    `INSERT INTO queen.timers (queue_id, timer_key, partition_id, deliver_at, transaction_id, message_id, payload)
     SELECT lp.queue_id, 'later-' || g, lp.id, now() + interval '1 day', 'later-' || g, gen_random_uuid(), convert_to('x', 'UTF8')
     FROM generate_series(1, $1::integer) g
     JOIN queen.log_partitions lp ON lp.name = 'f' || (g % 2)
     JOIN queen.queues q ON q.id = lp.queue_id AND q.name = 'fails'`,
    [later],
  );
  const due = ['d0', 'd1', 'd2'];
  for (const k of due)
    await client
      .timer('fails')
      .key(k)
      .partition('f0')
      .at(new Date(Date.now() - 1000))
      .payload(k)
      .schedule();
  await sql.query(`ANALYZE queen.timers`);
  let failNext = true;
  const s = new TimerSweeper({
    pool: t.context.stack.engine.pool,
    pollMs: 3_600_000,
    batch: 1000,
    metrics: new MetricsRegistry(),
    loop: false,
    beforeCommit: async () => {
      if (!failNext) return;
      failNext = false;
      throw new Error('injected before commit');
    },
  });
  await s.start();
  t.teardown(() => s.stop());
  await t.throwsAsync(s.sweepOnce(), { message: /injected before commit/ });
  for (const k of due) {
    const peek = await client.timer('fails').key(k).peek();
    t.is(peek?.attempts, 1, `${k}: one failed fire recorded`);
    t.regex(peek?.lastError ?? '', /injected before commit/);
  }
  const untouched = await sql.query(`SELECT count(*)::integer AS n FROM queen.timers WHERE timer_key LIKE 'later-%' AND attempts <> 0`);
  t.is(untouched.rows[0].n, 0, 'no other row counted');

  // What recording a failure reads: the due timers, not every pending one.
  const ids = (await sql.query(`SELECT message_id::text AS id FROM queen.timers WHERE timer_key LIKE 'd_'`)).rows.map(
    (r) => r.id as string,
  );
  const { tuplesRead } = await timersTuplesRead(sql, 'SELECT queen.timer_record_failure_v1($1::uuid[], $2)', [ids, 'measured']);
  t.true(tuplesRead <= 10, `recording a failure of ${ids.length} timers read ${tuplesRead} tuples of ${later + ids.length}`);

  // The rows are due again: the next sweep fires them, each once.
  const fired = await s.sweepOnce();
  t.is(
    fired.reduce((n, o) => n + o.count, 0),
    due.length,
  );
  const log = await logOf(sql, 'fails');
  t.is(log.size, due.length);
  await sql.query(`DELETE FROM queen.timers`);
});

test.serial('queenctl timers: schedule, list, peek, cancel', async (t) => {
  const { stack } = t.context;
  const ctl = async (...args: string[]) => {
    let out = '';
    let err = '';
    const code = await run(['--server', stack.api.url, 'timers', ...args], {
      out: (x) => (out += x),
      err: (x) => (err += x),
      env: {},
      read: async () => '',
    });
    return { code, out, err };
  };
  const s = await ctl('schedule', 'ctlq', 'k1', '--delay', '30m', '--partition', 'p', '{"a":1}', '-o', 'json');
  t.is(s.code, 0, s.err);
  const scheduled = JSON.parse(s.out) as { status: string; messageId: string };
  t.is(scheduled.status, 'scheduled');
  const list = await ctl('list', 'ctlq');
  t.is(list.code, 0);
  t.regex(list.out, new RegExp(`^KEY +PARTITION +DELIVER AT +MESSAGE ID +ATTEMPTS\nk1 +p +\\S+ +${scheduled.messageId} +0\n$`));
  t.regex((await ctl('peek', 'ctlq', 'k1')).out, new RegExp(`^pending key=k1 partition=p .*messageId=${scheduled.messageId}`));
  t.is((await ctl('cancel', 'ctlq', 'k1')).out, 'cancelled\n');
  t.regex((await ctl('cancel', 'ctlq', 'k1')).out, /^absent \(no longer pending; it may have been delivered\)/);
  t.regex((await ctl('peek', 'ctlq', 'k1')).out, /^absent/);
  const bad = await ctl('schedule', 'ctlq', 'k2', '{}');
  t.is(bad.code, 2);
  t.regex(bad.err, /exactly one of --delay or --at/);
});
