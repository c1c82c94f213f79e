import anyTest, { type TestFn } from 'ava';
import fc from 'fast-check';
import pg from 'pg';
import { DedupCache } from '../../src/dedup/index.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { LogWriter, type PushItem, type PushResult } from '../../src/engine/writer.js';
import { CacheWatermarks } from '../../src/fusion/cacheWatermarks.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  engines: LogEngine[];
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('dedupcache');
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 2 }), engines: [] };
});
teardownAndCheckLeaks(test, async (t) => {
  await Promise.all(t.context.engines.map((e) => e.stop()));
  await t.context.sql?.end();
  await t.context.db?.drop();
});

/** One "broker": its own pool, metrics, and (optionally) its own cache. */
async function broker(t: { context: Ctx }, capMb: number | false, metadataTtlMs = 0) {
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ connectionString: t.context.db.url, poolSize: 3, metrics });
  await engine.start();
  t.context.engines.push(engine);
  const cache = capMb === false ? undefined : new DedupCache({ capBytes: capMb * 1024 * 1024 });
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs, watermarks: cache ? new CacheWatermarks(cache, engine.pool, metrics) : undefined });
  return { engine, cache, writer, metrics, probesRun: () => metrics.counter('queen_probe_run_total', '').get(), probesSkipped: () => metrics.counter('queen_probe_skipped_total', '').get() };
}

const item = (queue: string, partition: string, txn: string): PushItem => ({ queue, partition, transactionId: txn, payload: Buffer.from('{}') });
const verdicts = (rs: PushResult[]) => rs.map((r) => `${r.status}@${r.offset}`);

test.serial('steady state: after warm-up a single broker sends p_verified == last_offset, so SQL never probes', async (t) => {
  const b = await broker(t, 64);
  await b.writer.push([item('steady', 'p', 'warm-0')]); // first contact hydrates the (empty) window
  const run0 = b.probesRun();
  const skipped0 = b.probesSkipped();
  for (let i = 1; i <= 50; i++) {
    const res = await b.writer.push(Array.from({ length: 20 }, (_, j) => item('steady', 'p', `m-${i}-${j}`)));
    t.true(res.every((r) => r.status === 'queued'));
  }
  t.is(b.probesRun(), run0, 'no probe ran after warm-up');
  t.is(b.probesSkipped() - skipped0, 50, 'every push skipped it');
  // A retry is a local hit: routed to SQL with -1, which answers the original id.
  const [dup] = await b.writer.push([item('steady', 'p', 'm-7-3')]);
  t.is(dup!.status, 'duplicate');
  t.is(dup!.offset, 1 + 6 * 20 + 3);
  t.is(b.probesRun(), run0 + 1);
});

test.serial('random histories: verdicts with the cache equal verdicts with -1 (interleaving broker, window changes)', async (t) => {
  const cached = await broker(t, 64);
  const plain = await broker(t, false);
  const other = await broker(t, false);
  let round = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.oneof(
          fc.record({ kind: fc.constant('push' as const), txns: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 8 }), part: fc.integer({ min: 0, max: 2 }) }),
          fc.record({ kind: fc.constant('other' as const), txns: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 4 }), part: fc.integer({ min: 0, max: 2 }) }),
          fc.record({ kind: fc.constant('window' as const), seconds: fc.constantFrom(0, 60, 3600) }),
          fc.record({ kind: fc.constant('age' as const) }),
        ),
        { minLength: 5, maxLength: 30 },
      ),
      async (ops) => {
        round++;
        // Two queues receive the same history: one through the cached broker, one through -1.
        const qa = `eqa${round}`;
        const qb = `eqb${round}`;
        for (const op of ops) {
          if (op.kind === 'push' || op.kind === 'other') {
            const w = op.kind === 'push' ? [cached.writer, plain.writer] : [other.writer, other.writer];
            const a = await w[0]!.push(op.txns.map((x) => item(qa, `p${op.part}`, `t${x}`)));
            const b = await w[1]!.push(op.txns.map((x) => item(qb, `p${op.part}`, `t${x}`)));
            if (JSON.stringify(verdicts(a)) !== JSON.stringify(verdicts(b))) {
              throw new Error(`verdicts differ at ${JSON.stringify(op)}: ${verdicts(a)} vs ${verdicts(b)}`);
            }
          } else if (op.kind === 'window') {
            await t.context.sql.query('UPDATE queen.queues SET dedup_window_seconds = $2 WHERE name = ANY ($1)', [[qa, qb], op.seconds]);
          } else {
            // Time passes: every stored row becomes 2 minutes older.
            await t.context.sql.query(
              `UPDATE queen.log_txns SET created_at = created_at - interval '120 seconds'
               WHERE partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = ANY ($1))`,
              [[qa, qb]],
            );
          }
        }
      },
    ),
    { numRuns: 40 },
  );
  t.true(cached.probesSkipped() > 0, 'the cache did vouch along the way');
  t.log(`cached broker: ${cached.probesSkipped()} probes skipped, ${cached.probesRun()} run; hydrations ${cached.cache!.stats.hydrations}, gaps ${cached.cache!.stats.gaps}`);
});

test.serial('a window that grew behind a stale memo does not let the cache narrow the probe', async (t) => {
  const other = await broker(t, false);
  const cached = await broker(t, 64, 60_000); // memo outlives the /configure below
  await other.writer.push([item('grow', 'p', 'old-event')]);
  await t.context.sql.query(`UPDATE queen.queues SET dedup_window_seconds = 60 WHERE name = 'grow'`);
  await t.context.sql.query(`UPDATE queen.log_txns SET created_at = created_at - interval '10 minutes' WHERE partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'grow')`);
  // The cached broker hydrates under a 60 s window: the 10-minute-old row is outside it.
  const [first] = await cached.writer.push([item('grow', 'p', 'new-1')]);
  t.is(first!.status, 'queued');
  const pid = (await cached.engine.provision([{ queue: 'grow', partition: 'p' }]))[0]!.partitionId;
  t.is(cached.cache!.entryInfo(pid)?.windowSeconds, 60, 'the entry was built under the 60 s window');
  // The window grows to an hour; the broker's memo still says 60 s.
  await t.context.sql.query(`UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'grow'`);
  const [again] = await cached.writer.push([item('grow', 'p', 'old-event')]);
  t.is(again!.status, 'duplicate', 'SQL voids a watermark vouched under the smaller window');
  t.is(again!.offset, 0);
});

test.serial('two brokers with their own caches on the same partitions: exact, and each sees the other as a gap', async (t) => {
  const a = await broker(t, 64);
  const b = await broker(t, 64);
  const ids = new Map<string, string>();
  for (let i = 0; i < 40; i++) {
    const w = i % 2 === 0 ? a : b;
    const batch = Array.from({ length: 5 }, (_, j) => item('multi', `p${j % 2}`, `x${(i * 3 + j) % 60}`));
    for (const r of await w.writer.push(batch)) {
      const key = `${r.partition}/${r.transactionId}`;
      if (r.status === 'queued') {
        t.false(ids.has(key), `${key} queued twice`);
        ids.set(key, r.id!);
      } else {
        t.is(r.status, 'duplicate');
        t.is(r.id, ids.get(key) ?? null, `${key} duplicate answers the original id`);
      }
    }
  }
  t.true(a.cache!.stats.gaps > 0 && b.cache!.stats.gaps > 0, `gaps a=${a.cache!.stats.gaps} b=${b.cache!.stats.gaps}`);
  const stored = await t.context.sql.query(`SELECT sum(end_offset - base_offset + 1)::int AS n FROM queen.log_txns WHERE partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'multi')`);
  t.is(stored.rows[0].n, ids.size);
});

test.serial('memory pressure: a tiny cap over many partitions settles into a resident set plus suppressed overflow, verdicts exact', async (t) => {
  const PARTS = 300;
  const PER = 400; // hashes per partition: ~300 x 400 x 18 B = 2.1 MB of in-window hashes vs a 1 MB cap
  const loader = await broker(t, false);
  for (let p = 0; p < PARTS; p += 10) {
    const items: PushItem[] = [];
    for (let q = p; q < p + 10; q++) for (let i = 0; i < PER; i++) items.push(item('pressure', `p${q}`, `h${q}-${i}`));
    await loader.writer.push(items);
  }
  const b = await broker(t, 1);
  const rounds: number[] = [];
  for (let r = 0; r < 4; r++) {
    const before = b.cache!.stats.hydrations;
    for (let p = 0; p < PARTS; p += 20) {
      const items: PushItem[] = [];
      for (let q = p; q < p + 20; q++) items.push(item('pressure', `p${q}`, `new-${r}-${q}`), item('pressure', `p${q}`, `h${q}-${r}`));
      const res = await b.writer.push(items);
      res.forEach((x, i) => t.is(x.status, i % 2 === 0 ? 'queued' : 'duplicate', `${x.partition}/${x.transactionId}`));
    }
    rounds.push(b.cache!.stats.hydrations - before);
  }
  t.log(`hydrations per round ${rounds.join(', ')}; suppressed ${b.cache!.suppressedCount()}; resident ${b.cache!.residentBytes()} B`);
  t.true(b.cache!.residentBytes() <= 1024 * 1024, 'the cap holds');
  t.true(b.cache!.suppressedCount() > 0, 'overflow is suppressed, not thrashed');
  t.true(rounds[3]! <= rounds[0]!, 'rehydrations do not grow round over round (no thrash)');
  t.true(rounds[3]! < PARTS / 4, `later rounds rehydrate few partitions (${rounds[3]})`);
});
