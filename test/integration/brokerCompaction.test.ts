import anyTest, { type TestFn } from 'ava';
import fc from 'fast-check';
import pg from 'pg';
import { compactPartitionInBroker, compactPartitionInSql } from '../../src/engine/compactionStore.js';
import { runLevel } from '../../src/engine/hashRunSlices.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { LogWriter, type PushItem } from '../../src/engine/writer.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';

/**
 * The broker's build of a compaction step (src/engine/compactionStore.ts,
 * compactPartitionInBroker) against PostgreSQL's (queen.log_compact_v1):
 * twin partitions get the same pushes (the same hashes at the same
 * offsets), one is compacted by each build with the same arguments, and
 * after every step both must hold the same runs (span, bits, count, level)
 * with the same slices (bucket, hashes, offsets, in order), and report the
 * same outcome. log_compact_v1 is the reference the cold path's argument
 * was written for; equal runs carry the argument over.
 */

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  engine: LogEngine;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('brokercompact');
  const engine = new LogEngine({ connectionString: db.url, poolSize: 2, metrics: new MetricsRegistry() });
  await engine.start();
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 3 }), engine };
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
  payload: Buffer.from('{}'),
});

/** A partition's runs and slices, as comparable text (run ids left out: they differ between twins). */
async function runsOf(sql: pg.Pool, pid: string): Promise<string[]> {
  const r = await sql.query(
    `SELECT r.run_lo, r.run_hi, r.bits, r.n, r.level, s.bucket, encode(s.hashes, 'hex') AS h, s.offs::text AS offs
     FROM queen.log_hash_runs r JOIN queen.log_hash_slices s ON s.run_id = r.run_id
     WHERE r.partition_id = $1
     ORDER BY r.run_hi, r.run_lo, r.level, s.bucket`,
    [pid],
  );
  return r.rows.map((x: Record<string, unknown>) => Object.values(x).join(' '));
}

/** A new queue's one partition holding 5 100 hashes, pushed 300 at a time (rows of at most 250 frames); returns its id. */
async function longTail(ctx: Ctx, queue: string): Promise<number> {
  const writer = new LogWriter(ctx.engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined });
  for (let k = 0; k < 17; k++) await writer.push(Array.from({ length: 300 }, (_, i) => item(queue, 'p', `${queue}${k * 300 + i}`)));
  const r = await ctx.sql.query(`SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1`, [
    queue,
  ]);
  return Number(r.rows[0].id);
}

/** The (hash, offset) pairs of a partition's log_txns rows that no run of it holds (the runs' invariant: 0). */
async function missingFromRuns(sql: pg.Pool, pid: number): Promise<number> {
  const r = await sql.query(
    `SELECT count(*)::int AS n FROM queen.log_txns t CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
     WHERE t.partition_id = $1 AND NOT EXISTS (
       SELECT 1 FROM queen.log_hash_runs r JOIN queen.log_hash_slices s ON s.run_id = r.run_id
       CROSS JOIN LATERAL queen.log_unnest_hashes(s.hashes) sh
       WHERE r.partition_id = $1 AND sh.h = th.h AND s.offs[sh.idx + 1] = t.base_offset + th.idx)`,
    [pid],
  );
  return (r.rows[0] as { n: number }).n;
}

/**
 * Pairs of a partition's runs whose time (created_us, sql/000094) is not
 * their log_txns row's created_at: missing, different, or without a row.
 * Twins are pushed at different moments, so times are compared with each
 * twin's own rows rather than between twins.
 */
async function wrongTimes(sql: pg.Pool, pid: string): Promise<number> {
  const r = await sql.query(
    `SELECT count(*)::int AS n
     FROM queen.log_hash_runs r
     JOIN queen.log_hash_slices s ON s.run_id = r.run_id
     CROSS JOIN LATERAL generate_subscripts(s.offs, 1) AS k
     LEFT JOIN queen.log_txns t ON t.partition_id = r.partition_id AND t.base_offset <= s.offs[k] AND t.end_offset >= s.offs[k]
     WHERE r.partition_id = $1
       AND s.created_us[k] IS DISTINCT FROM (extract(epoch FROM t.created_at) * 1000000)::bigint`,
    [pid],
  );
  return (r.rows[0] as { n: number }).n;
}

test('the broker builds the same runs and slices as log_compact_v1, merges included', async (t) => {
  const { sql, engine } = t.context;
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined });
  let round = 0;
  let steps = 0;
  let merges = 0;
  await fc.assert(
    fc.asyncProperty(
      // One minimum tail and fan-out per history, as a compactor has: runs then share levels and merge.
      fc.integer({ min: 1, max: 60 }),
      fc.integer({ min: 2, max: 3 }),
      fc.array(
        fc.oneof(
          // Ids drawn from a small set: many re-sent (duplicates), some stored at several offsets after a window change.
          {
            weight: 4,
            arbitrary: fc.record({
              kind: fc.constant('push' as const),
              txns: fc.array(fc.integer({ min: 0, max: 3000 }), { minLength: 1, maxLength: 120 }),
            }),
          },
          { weight: 3, arbitrary: fc.constant({ kind: 'compact' as const }) },
          { weight: 1, arbitrary: fc.record({ kind: fc.constant('window' as const), seconds: fc.constantFrom(0, 3600) }) },
        ),
        { minLength: 3, maxLength: 40 },
      ),
      async (minTail, fanout, ops) => {
        round++;
        const q = `bc${round}`;
        // Every history ends with runs of one size, enough of them to merge.
        const closing = Array.from({ length: 2 * fanout + 1 }, (_, k) => [
          { kind: 'push' as const, txns: Array.from({ length: 2 * minTail }, (_, i) => 10_000 + k * 1000 + i) },
          { kind: 'compact' as const },
        ]).flat();
        for (const op of [...ops, ...closing]) {
          if (op.kind === 'push') {
            const a = await writer.push(op.txns.map((x) => item(q, 'sql', `t${x}`)));
            const b = await writer.push(op.txns.map((x) => item(q, 'broker', `t${x}`)));
            t.deepEqual(
              b.map((r) => `${r.status}@${r.offset}`),
              a.map((r) => `${r.status}@${r.offset}`),
            );
          } else if (op.kind === 'window') {
            await sql.query('UPDATE queen.queues SET dedup_window_seconds = $2 WHERE name = $1', [q, op.seconds]);
          } else {
            const ids = (
              await sql.query(
                `SELECT lp.name, lp.id FROM queen.log_partitions lp JOIN queen.queues qu ON qu.id = lp.queue_id WHERE qu.name = $1`,
                [q],
              )
            ).rows as { name: string; id: string }[];
            const pid = (name: string) => ids.find((x) => x.name === name)?.id;
            const [ps, pb] = [pid('sql'), pid('broker')];
            if (ps === undefined || pb === undefined) continue;
            const viaSql = await compactPartitionInSql(sql, Number(ps), minTail, fanout);
            const viaBroker = await compactPartitionInBroker(sql, Number(pb), minTail, fanout);
            t.deepEqual(viaBroker, viaSql);
            t.deepEqual(await runsOf(sql, pb), await runsOf(sql, ps));
            t.is(await wrongTimes(sql, pb), 0, "every pair the broker wrote holds its row's time");
            t.is(await wrongTimes(sql, ps), 0, "every pair log_compact_v1 wrote holds its row's time");
            steps++;
            if (viaSql.merged > 0) merges++;
          }
        }
      },
    ),
    { numRuns: 25, seed: Number(process.env.FC_SEED ?? Date.now() % 2 ** 31) },
  );
  // The comparison must have covered merges and new runs, not only empty steps.
  t.true(steps > 20, `compaction steps compared: ${steps}`);
  t.true(merges > 0, `merges compared: ${merges}`);
});

test('a broker step that finds compacted_upto raised by another compactor rolls back whole (40001, retriable)', async (t) => {
  const { sql, engine } = t.context;
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined });
  await writer.push(Array.from({ length: 50 }, (_, i) => item('race', 'p', `r${i}`)));
  const pid = Number(
    (await sql.query(`SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'race'`)).rows[0]
      .id,
  );
  // Another compactor's step commits between this step's read of compacted_upto and its raise:
  // simulated by holding the raise's row lock, compacting meanwhile, then releasing it.
  const other = await sql.connect();
  try {
    await other.query('BEGIN');
    await other.query('SELECT 1 FROM queen.log_partitions WHERE id = $1 FOR UPDATE', [pid]);
    const step = compactPartitionInBroker(sql, pid, 1, 2);
    // Once the broker's step waits on the row lock at its raise (it read
    // compacted_upto before), the other transaction raises it and commits.
    await waitFor('the broker step waits at its raise', async () => {
      const r = await sql.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE queen.log_partitions lp SET compacted_upto%'`,
      );
      return r.rows[0].n > 0;
    });
    await other.query('UPDATE queen.log_partitions SET compacted_upto = last_offset WHERE id = $1', [pid]);
    await other.query('COMMIT');
    const err = await t.throwsAsync(step);
    t.is((err as { sqlstate?: string }).sqlstate, '40001');
    t.true((err as { retriable?: boolean }).retriable);
  } finally {
    other.release();
  }
  // Rolled back whole: no run was left behind.
  t.is(Number((await sql.query('SELECT count(*) AS n FROM queen.log_hash_runs WHERE partition_id = $1', [pid])).rows[0].n), 0);
});

test('a bounded broker step compacts a long tail in row-aligned pieces and merges nothing over the bound, holding every hash', async (t) => {
  const { sql } = t.context;
  // A tail five times the bound.
  const pid = await longTail(t.context, 'bounded');
  const bound = 1000;
  let steps = 0;
  for (;;) {
    const o = await compactPartitionInBroker(sql, pid, 1, 2, bound);
    steps++;
    t.true(o.compacted <= bound && o.merged <= bound, JSON.stringify(o));
    // compacted_upto is always a row's end.
    const at = (
      await sql.query(
        `SELECT lp.compacted_upto, lp.last_offset, EXISTS (SELECT 1 FROM queen.log_txns t WHERE t.partition_id = lp.id AND t.end_offset = lp.compacted_upto) AS row_end
         FROM queen.log_partitions lp WHERE lp.id = $1`,
        [pid],
      )
    ).rows[0];
    t.true(at.row_end, `compacted_upto ${at.compacted_upto} is a row's end`);
    if (!o.more && o.merged === 0) break;
    t.true(steps < 50, 'the steps come to an end');
  }
  t.true(steps >= 5, `steps: ${steps}`);
  const state = (await sql.query('SELECT compacted_upto, last_offset FROM queen.log_partitions WHERE id = $1', [pid])).rows[0];
  t.is(state.compacted_upto, state.last_offset);
  // The invariant itself: every (hash, offset) of the rows is in some run.
  t.is(await missingFromRuns(sql, pid), 0);
  // No run over the bound was made by a merge.
  const big = await sql.query('SELECT max(n)::int AS n FROM queen.log_hash_runs WHERE partition_id = $1', [pid]);
  t.true(big.rows[0].n <= bound, `largest run ${big.rows[0].n}`);
});

test('a step bound for new runs alone: runs are built in row-aligned pieces of that size and merged past it, holding every hash', async (t) => {
  const { sql } = t.context;
  const pid = await longTail(t.context, 'newbound');
  await t.throwsAsync(compactPartitionInBroker(sql, pid, 1, 2, 1000, 1001), { instanceOf: RangeError });
  const newBound = 600;
  let steps = 0;
  let largestMerge = 0;
  for (;;) {
    const o = await compactPartitionInBroker(sql, pid, 1, 2, 10_000, newBound);
    steps++;
    t.true(o.compacted <= newBound, `a new run of ${o.compacted} pairs`);
    largestMerge = Math.max(largestMerge, o.merged);
    if (!o.more && o.merged === 0) break;
    t.true(steps < 100, 'the steps come to an end');
  }
  // Merges went past the new-run bound: the two bounds are apart.
  t.true(largestMerge > newBound, `largest merge ${largestMerge}`);
  const state = (await sql.query('SELECT compacted_upto, last_offset FROM queen.log_partitions WHERE id = $1', [pid])).rows[0];
  t.is(state.compacted_upto, state.last_offset);
  t.is(await missingFromRuns(sql, pid), 0);
});

test('a merge wider than the fan-out replaces that many runs, narrows to fit the pair bound, sizes its run into its tier, and holds every hash', async (t) => {
  const { sql } = t.context;
  await t.throwsAsync(compactPartitionInBroker(sql, 1, 1, 4, 10_000, 600, 3), { instanceOf: RangeError });
  // Runs of at most 600 pairs (two rows of 250 or 300 frames), about nine of them.
  const compactWide = async (queue: string, maxPairs: number): Promise<{ pid: number; widths: number[]; merges: number[] }> => {
    const pid = await longTail(t.context, queue);
    const widths: number[] = [];
    const merges: number[] = [];
    for (let steps = 0; ; steps++) {
      const o = await compactPartitionInBroker(sql, pid, 1, 2, maxPairs, 600, 8);
      if (o.merged > 0) {
        widths.push(o.mergedRuns);
        merges.push(o.merged);
      }
      if (!o.more && o.merged === 0) break;
      t.true(steps < 100, 'the steps come to an end');
    }
    const state = (await sql.query('SELECT compacted_upto, last_offset FROM queen.log_partitions WHERE id = $1', [pid])).rows[0];
    t.is(state.compacted_upto, state.last_offset);
    t.is(await missingFromRuns(sql, pid), 0);
    return { pid, widths, merges };
  };

  // Room for eight: one merge of eight runs, written at the tier of its size (above level + 1).
  const wide = await compactWide('wide8', 10_000);
  t.deepEqual(wide.widths, [8]);
  const runs = (await sql.query('SELECT n::int AS n, level FROM queen.log_hash_runs WHERE partition_id = $1 ORDER BY n DESC', [wide.pid]))
    .rows as { n: number; level: number }[];
  t.is(runs[0]!.n, wide.merges[0]!);
  const smallLevel = Math.max(...runs.slice(1).map((r) => r.level));
  t.is(runs[0]!.level, runLevel(runs[0]!.n, 1, 2));
  t.true(runs[0]!.level > smallLevel + 1, `merged level ${runs[0]!.level}, merged runs at ${smallLevel}`);

  // A bound of 2 000 pairs fits four runs of ~600 at most: the merges narrow to fit it, never under the fan-out.
  const narrowed = await compactWide('wide8bound', 2_000);
  t.true(narrowed.widths.length > 0);
  for (const [k, w] of narrowed.widths.entries()) {
    t.true(w >= 2 && w < 8, `width ${w}`);
    t.true(narrowed.merges[k]! <= 2_000, `merge of ${narrowed.merges[k]} pairs`);
  }
});
