import anyTest, { type TestFn } from 'ava';
import pg from 'pg';
import { LogEngine } from '../../src/engine/logEngine.js';
import { BATCH_MAX_HASHES, fetchWindow, fetchWindows, type WindowFetchOutcome } from '../../src/engine/windowFetch.js';
import { LogWriter } from '../../src/engine/writer.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { pushItem, txnIds } from '../helpers/items.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';
import { partitionIdOf } from '../helpers/retain.js';

/**
 * Batched window fetches (src/engine/windowFetch.ts) against real
 * PostgreSQL: each partition of a batch gets exactly the rows it gets when
 * fetched alone, in offset order, with its own queue's window; a window too
 * large to share a batch is deferred before it is admitted; an unknown
 * partition and a refused one are reported, not fetched.
 */

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  engine: LogEngine;
  writer: LogWriter;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('windowfetch');
  const engine = new LogEngine({ connectionString: db.url, poolSize: 4, metrics: new MetricsRegistry() });
  await engine.start();
  t.context = {
    db,
    sql: new pg.Pool({ connectionString: db.url, max: 2 }),
    engine,
    writer: new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0 }),
  };
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.engine?.stop();
  await t.context.sql?.end();
  await t.context.db?.drop();
});

const item = (queue: string, txn: string) => pushItem(queue, 'p', txn);
const ids = txnIds;
const pid = async (t: { context: Ctx }, queue: string) => Number(await partitionIdOf(t.context.sql, queue, 'p'));

/** A snapshot's rows as comparable values (the hashes as hex). */
const rowsOf = (o: WindowFetchOutcome | undefined) =>
  o?.kind === 'snapshot' ? o.snapshot.rows.map((r) => [r.baseOffset, r.endOffset, r.hashes.toString('hex')]) : undefined;

test.serial(
  'a batch gives each partition the rows it gets alone; a large window is deferred unadmitted; unknown and refused ones are reported',
  async (t) => {
    const { writer, engine, sql } = t.context;
    // Several pushes each, so each partition has several rows to keep apart and in order.
    for (let round = 0; round < 3; round++) {
      for (const q of ['fa', 'fb', 'fc', 'fd']) await writer.push(ids(`${q}${round}`, 10).map((x) => item(q, x)));
    }
    await writer.push(ids('big', BATCH_MAX_HASHES + 1).map((x) => item('fbig', x)));
    // Another window for one queue: its snapshot carries it.
    await sql.query('UPDATE queen.queues SET dedup_window_seconds = 7200 WHERE name = $1', ['fc']);
    const [a, b, c, d, big] = await Promise.all(['fa', 'fb', 'fc', 'fd', 'fbig'].map((q) => pid(t, q)));
    const unknown = 987654321;

    const admitted: number[] = [];
    const outcomes = new Map<number, WindowFetchOutcome>();
    await fetchWindows(
      engine.pool,
      [a!, big!, b!, unknown, c!, d!],
      (p, st) => {
        admitted.push(p);
        t.true(st.inWindowHashes <= BATCH_MAX_HASHES, 'admit is asked only for windows the batch fetches');
        return p !== d;
      },
      (p, o) => {
        t.false(outcomes.has(p), 'one outcome a partition');
        outcomes.set(p, o);
      },
    );
    t.deepEqual(admitted.sort(), [a, b, c, d].sort());
    t.is(outcomes.size, 6);
    t.is(outcomes.get(unknown)?.kind, 'refused');
    t.is(outcomes.get(d!)?.kind, 'refused');
    const deferred = outcomes.get(big!);
    t.is(deferred?.kind, 'deferred');
    if (deferred?.kind === 'deferred') t.is(deferred.state.inWindowHashes, BATCH_MAX_HASHES + 1);

    for (const p of [a!, b!, c!]) {
      const alone = await fetchWindow(engine.pool, p, () => true);
      const inBatch = outcomes.get(p);
      t.is(inBatch?.kind, 'snapshot');
      if (inBatch?.kind !== 'snapshot' || alone === undefined) continue;
      t.deepEqual(rowsOf(inBatch), rowsOf({ kind: 'snapshot', snapshot: alone }), `partition ${p}: the batch's rows are its own`);
      t.is(inBatch.snapshot.lastOffset, alone.lastOffset);
      t.is(inBatch.snapshot.rows.length, 3);
      // In offset order and contiguous from 0 to the last offset.
      let next = 0;
      for (const r of inBatch.snapshot.rows) {
        t.is(r.baseOffset, next);
        next = r.endOffset + 1;
      }
      t.is(next - 1, inBatch.snapshot.lastOffset);
      t.is(inBatch.snapshot.windowSeconds, p === c ? 7200 : alone.windowSeconds);
    }
    t.not(rowsOf(outcomes.get(a!))?.[0]?.[2], rowsOf(outcomes.get(b!))?.[0]?.[2], 'different partitions, different hashes');

    // Alone, a large window is fetched, not deferred.
    const bigAlone = await fetchWindow(engine.pool, big!, () => true);
    t.is(bigAlone?.inWindowHashes, BATCH_MAX_HASHES + 1);
    t.is(
      bigAlone?.rows.reduce((n, r) => n + r.hashes.length / 16, 0),
      BATCH_MAX_HASHES + 1,
    );
  },
);
