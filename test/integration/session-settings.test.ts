import anyTest, { type TestFn } from 'ava';
import pg from 'pg';
import { LogEngine } from '../../src/engine/logEngine.js';
import { LogWriter } from '../../src/engine/writer.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { pushItem, txnIds } from '../helpers/items.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * The engine's sessions run without JIT (src/engine/session.ts), against
 * real PostgreSQL: every session its pool opens says `jit = off`, and the
 * queue status read, which PostgreSQL compiles on a plain session once its
 * cost estimate passes jit_above_cost (here forced to 0, as 2 000 partitions
 * a queue force it in the memory soak), runs uncompiled on the engine's.
 */

interface Ctx {
  db: TestDatabase;
  engine: LogEngine;
  plain: pg.Client;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('session');
  const engine = new LogEngine({ connectionString: db.url, poolSize: 4, metrics: new MetricsRegistry() });
  await engine.start();
  const plain = new pg.Client({ connectionString: db.url });
  await plain.connect();
  t.context = { db, engine, plain };
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0 });
  for (const p of ['a', 'b', 'c']) await writer.push(txnIds(p, 5).map((x) => pushItem('status-q', p, x)));
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.plain?.end();
  await t.context.engine?.stop();
  await t.context.db?.drop();
});

test.serial('every session the engine pool opens runs with jit off', async (t) => {
  // Held at once, so they are the pool's four distinct sessions.
  const clients = await Promise.all([0, 1, 2, 3].map(() => t.context.engine.pool.connect()));
  try {
    const pids = new Set<number>();
    for (const c of clients) {
      const r = await c.query<{ jit: string; pid: number }>('SELECT current_setting($1) AS jit, pg_backend_pid() AS pid', ['jit']);
      t.is(r.rows[0]!.jit, 'off');
      pids.add(r.rows[0]!.pid);
    }
    t.is(pids.size, 4);
  } finally {
    for (const c of clients) c.release();
  }
});

/** Whether the plan of the queue status read, with every JIT threshold at 0, was compiled. */
async function statusReadCompiles(c: pg.ClientBase): Promise<boolean> {
  await c.query('BEGIN');
  try {
    for (const name of ['jit_above_cost', 'jit_inline_above_cost', 'jit_optimize_above_cost'])
      await c.query('SELECT set_config($1, $2, true)', [name, '0']);
    const r = await c.query<{ 'QUERY PLAN': [Record<string, unknown>] }>(
      'EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM queen.queue_retention_get_v2($1)',
      ['status-q'],
    );
    return 'JIT' in r.rows[0]!['QUERY PLAN'][0];
  } finally {
    await c.query('ROLLBACK');
  }
}

test.serial('the queue status read is not compiled on the engine pool, where a plain session compiles it', async (t) => {
  const available = (await t.context.plain.query<{ a: boolean }>('SELECT pg_jit_available() AS a')).rows[0]!.a;
  // The control: without the engine's setting, PostgreSQL compiles this plan
  // (when its server has JIT at all; Debian's PostgreSQL 15 does).
  t.is(await statusReadCompiles(t.context.plain), available);
  const c = await t.context.engine.pool.connect();
  try {
    t.false(await statusReadCompiles(c));
  } finally {
    c.release();
  }
});
