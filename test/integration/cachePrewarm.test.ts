import anyTest, { type TestFn } from 'ava';
import pg from 'pg';
import { estimateFootprintBytes } from '../../src/dedup/index.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { LogWriter } from '../../src/engine/writer.js';
import { PREWARM_BUDGET_FRACTION } from '../../src/fusion/cachePrewarm.js';
import { defaultPipelineOptions, WritePipeline } from '../../src/pipeline.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { pushItem, txnIds } from '../helpers/items.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * The start-up cache prewarm (src/fusion/cachePrewarm.ts) against real
 * PostgreSQL: a pipeline started over a store holds, before its first push,
 * complete entries for the partitions written within their window, most
 * recent first, up to its share of the budget; not for a partition written
 * before its window or in a queue without one. Its pushes then vouch from
 * those entries (no lookup, no probe), with every verdict right.
 */

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  engine: LogEngine;
  pipelines: WritePipeline[];
}
const test = anyTest as TestFn<Ctx>;

const PARTS = 6;
const PER_PART = 50;

test.before(async (t) => {
  const db = await createTestDatabase('cacheprewarm');
  const engine = new LogEngine({ connectionString: db.url, poolSize: 2, metrics: new MetricsRegistry() });
  await engine.start();
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 2 }), engine, pipelines: [] };
  // The store the pipelines start over, written one partition after another
  // (p5 the most recent), then a partition written before its window and a
  // queue without a window.
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0 });
  for (let p = 0; p < PARTS; p++) await writer.push(ids(`p${p}`, PER_PART).map((x) => item('warm', `p${p}`, x)));
  await writer.push(ids('stale', PER_PART).map((x) => item('warm', 'stale', x)));
  await t.context.sql.query(
    `UPDATE queen.log_partitions SET last_write_at = now() - interval '2 hours'
      WHERE name = 'stale' AND queue_id = (SELECT id FROM queen.queues WHERE name = 'warm')`,
  );
  await writer.push(ids('nowin', PER_PART).map((x) => item('nowindow', 'p0', x)));
  await t.context.sql.query(`UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'nowindow'`);
});
teardownAndCheckLeaks(test, async (t) => {
  await Promise.all(t.context.pipelines.map((p) => p.stop()));
  await t.context.engine?.stop();
  await t.context.sql?.end();
  await t.context.db?.drop();
});

const item = pushItem;
const ids = txnIds;

async function partitions(t: { context: Ctx }): Promise<Map<string, { id: number; last: number }>> {
  const r = await t.context.sql.query(
    `SELECT q.name || '/' || lp.name AS key, lp.id, lp.last_offset FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id`,
  );
  return new Map(r.rows.map((row) => [row.key as string, { id: Number(row.id), last: Number(row.last_offset) }]));
}

async function pipeline(t: { context: Ctx }, cacheMb: number, prewarmPartitions = 4096): Promise<WritePipeline> {
  const p = new WritePipeline(defaultPipelineOptions(t.context.db.url, { cacheMb, prewarmPartitions, metrics: new MetricsRegistry() }));
  t.context.pipelines.push(p);
  await p.start();
  return p;
}

const counter = (p: WritePipeline, name: string) => p.metrics.counter(name, '').get();

test.serial(
  'a pipeline started over a store holds complete entries for its recently written partitions before its first push',
  async (t) => {
    const parts = await partitions(t);
    const p = await pipeline(t, 64);
    t.truthy(p.prewarm);
    await p.prewarm!.done();
    for (let i = 0; i < PARTS; i++) {
      const { id, last } = parts.get(`warm/p${i}`)!;
      const info = p.cache!.entryInfo(id);
      t.is(info?.verifiedUpto, last, `p${i} installed up to its last offset`);
      t.is(info?.state, 'vouching');
    }
    t.is(p.cache!.entryInfo(parts.get('warm/stale')!.id), undefined, 'written before its window: not warmed');
    t.is(p.cache!.entryInfo(parts.get('nowindow/p0')!.id), undefined, 'no window: not warmed');
    t.is(counter(p, 'queen_dedup_prewarm_partitions_total'), PARTS);

    const res = await p.writer.push([
      ...Array.from({ length: PARTS }, (_, i) => item('warm', `p${i}`, `p${i}-${PER_PART - 1}`)),
      ...Array.from({ length: PARTS }, (_, i) => item('warm', `p${i}`, `p${i}-new`)),
    ]);
    t.deepEqual(
      res.map((r) => r.status),
      [...Array<string>(PARTS).fill('duplicate'), ...Array<string>(PARTS).fill('queued')],
    );
    t.is(counter(p, 'queen_lookup_total'), 0, 'vouched from the warmed entries: no lookup');
    t.is(counter(p, 'queen_probe_run_total'), 0, 'and no probe');
  },
);

test.serial('the prewarm stops at its share of the budget, the most recently written first; 0 partitions turns it off', async (t) => {
  // p3 then p5 written last (the test before wrote to all six at once).
  const writer = new LogWriter(t.context.engine, { maxPayloadBytes: 1024, metadataTtlMs: 0 });
  for (const q of ['p3', 'p5']) await writer.push([item('warm', q, `${q}-again`)]);
  const parts = await partitions(t);
  // Room, by the prewarm's estimate, for two partitions and a half.
  const need = estimateFootprintBytes(PER_PART + 2);
  const cacheMb = (2.5 * need) / PREWARM_BUDGET_FRACTION / (1024 * 1024);
  const p = await pipeline(t, cacheMb);
  await p.prewarm!.done();
  t.is(counter(p, 'queen_dedup_prewarm_partitions_total'), 2);
  const warmed = Array.from({ length: PARTS }, (_, i) => p.cache!.entryInfo(parts.get(`warm/p${i}`)!.id) !== undefined);
  t.deepEqual(warmed, [false, false, false, true, false, true], 'the two written last');

  const off = await pipeline(t, 64, 0);
  t.is(off.prewarm, undefined);
  t.is(off.cache!.residentPartitions(), 0);
});

test.serial('a pipeline stopped while it warms stops cleanly', async (t) => {
  const p = await pipeline(t, 64);
  await p.stop();
  t.is(p.prewarm!.state, 'stopped');
});
