import anyTest, { type TestFn } from 'ava';
import fc from 'fast-check';
import pg from 'pg';
import { Compactor } from '../../src/compaction/compactor.js';
import { compactPartition, type CompactionBuild } from '../../src/engine/compactionStore.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { LogWriter, type PushItem, type PushResult } from '../../src/engine/writer.js';
import { compactOnLongProbes } from '../../src/pipeline.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { HASH_BYTES, hashString, writeHashAt } from '../../src/util/txnHash.js';
import { NIL_UUID } from '../../src/util/uuidv7.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { syncSliceTimes } from '../helpers/sliceTimes.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';

/**
 * The cold path (docs/deduplication.md, "The cold path") against real
 * PostgreSQL: log_push_v12 reads a partition's hash runs for its rows at or
 * below compacted_upto and log_txns above. Its verdicts must be those of the
 * same history on a twin queue that is never compacted (every probed row
 * read in log_txns, as v11 does), whatever the compactions, merges, purges,
 * window changes and ageing in between. No broker cache on either side:
 * every push probes (p_verified = -1), which is the cold path's case.
 */

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  engines: LogEngine[];
  compactors: Compactor[];
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('coldpath');
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 4 }), engines: [], compactors: [] };
});
teardownAndCheckLeaks(test, async (t) => {
  await Promise.all(t.context.compactors.map((c) => c.stop()));
  await Promise.all(t.context.engines.map((e) => e.stop()));
  await t.context.sql?.end();
  await t.context.db?.drop();
});

async function writer(t: { context: Ctx }): Promise<{ writer: LogWriter; engine: LogEngine; metrics: MetricsRegistry }> {
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ connectionString: t.context.db.url, poolSize: 3, metrics });
  await engine.start();
  t.context.engines.push(engine);
  return { writer: new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined }), engine, metrics };
}

const item = (queue: string, partition: string, txn: string): PushItem => ({
  queue,
  partition,
  transactionId: txn,
  payload: Buffer.from('{}'),
});
/** What a verdict says: status, the offset (the original's for a duplicate) and whether its id is gone. */
const verdicts = (rs: PushResult[]): string[] => rs.map((r) => `${r.status}@${r.offset}${r.id === NIL_UUID ? '/gone' : ''}`);

const hashHex = (txn: string): string => {
  const b = Buffer.alloc(HASH_BYTES);
  writeHashAt(new DataView(b.buffer, b.byteOffset, HASH_BYTES), 0, hashString(txn));
  return b.toString('hex');
};

/** The hashes a push to this partition must find: its log_txns rows at or above txns_start and inside the window (none when dedup is off). */
const inWindowHashes = async (sql: pg.Pool, queue: string, partition: string): Promise<Set<string>> =>
  new Set(
    (
      await sql.query(
        `SELECT encode(th.h, 'hex') AS h
         FROM queen.log_partitions lp
         JOIN queen.queues q ON q.id = lp.queue_id
         JOIN queen.log_txns t ON t.partition_id = lp.id
         CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
         WHERE q.name = $1 AND lp.name = $2 AND q.dedup_window_seconds > 0
           AND t.end_offset >= lp.txns_start AND t.created_at >= now() - make_interval(secs => q.dedup_window_seconds)`,
        [queue, partition],
      )
    ).rows.map((r: { h: string }) => r.h),
  );

const partitionIds = async (sql: pg.Pool, queue: string): Promise<string[]> =>
  (
    await sql.query(
      'SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 ORDER BY lp.id',
      [queue],
    )
  ).rows.map((r: { id: string }) => r.id);

test.serial(
  'v12 over runs and tail answers as a never-compacted twin does, on random histories with compactions, merges, purges and window changes',
  async (t) => {
    const cold = await writer(t);
    const plain = await writer(t);
    const sql = t.context.sql;
    let round = 0;
    let pushes = 0;
    let fromRuns = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            {
              weight: 6,
              arbitrary: fc.record({
                kind: fc.constant('push' as const),
                // 1-12 items take the batched probe, 33-60 the joined one (tails of at most 4 096 hashes).
                txns: fc.oneof(
                  fc.array(fc.integer({ min: 0, max: 80 }), { minLength: 1, maxLength: 12 }),
                  fc.array(fc.integer({ min: 0, max: 80 }), { minLength: 33, maxLength: 60 }),
                ),
                part: fc.integer({ min: 0, max: 1 }),
              }),
            },
            {
              weight: 3,
              arbitrary: fc.record({
                kind: fc.constant('compact' as const),
                minTail: fc.integer({ min: 1, max: 20 }),
                fanout: fc.integer({ min: 2, max: 3 }),
                build: fc.constantFrom<CompactionBuild>('broker', 'sql'),
                // Merges of up to 3x the fan-out at once, as the compactor runs them where runs are rarely read (the broker build only).
                widen: fc.integer({ min: 1, max: 3 }),
              }),
            },
            // A push racing a compaction of its own partition.
            {
              weight: 2,
              arbitrary: fc.record({
                kind: fc.constant('race' as const),
                txns: fc.array(fc.integer({ min: 0, max: 80 }), { minLength: 1, maxLength: 40 }),
              }),
            },
            // dedup off for a while: one hash gets stored at several offsets
            { weight: 1, arbitrary: fc.record({ kind: fc.constant('window' as const), seconds: fc.constantFrom(0, 3600) }) },
            // time passes in SQL: every stored row 2 hours older (out of the window; the runs still name them)
            { weight: 1, arbitrary: fc.record({ kind: fc.constant('age' as const) }) },
            // retention: the oldest rows of each partition removed, txns_start raised past them
            { weight: 1, arbitrary: fc.record({ kind: fc.constant('purge' as const), rows: fc.integer({ min: 1, max: 3 }) }) },
          ),
          { minLength: 4, maxLength: 30 },
        ),
        async (ops) => {
          round++;
          const qc = `cold${round}`;
          const qp = `plain${round}`;
          // Either build of a step (the broker's, or log_compact_v1 as a broker before it runs it), mixed in one history.
          const compactAll = async (minTail: number, fanout: number, build: CompactionBuild = 'broker', width = fanout) => {
            for (const pid of await partitionIds(sql, qc)) await compactPartition(sql, Number(pid), minTail, fanout, build, width);
          };
          const pushBoth = async (txns: number[], part: number) => {
            const a = await cold.writer.push(txns.map((x) => item(qc, `p${part}`, `t${x}`)));
            // An oracle apart from both twins' probes (which share the tail
            // paths): an id not repeated within the push is a duplicate iff
            // its hash is stored in the window.
            const stored = await inWindowHashes(sql, qp, `p${part}`);
            const b = await plain.writer.push(txns.map((x) => item(qp, `p${part}`, `t${x}`)));
            pushes++;
            txns.forEach((x, k) => {
              if (txns.indexOf(x) !== txns.lastIndexOf(x)) return;
              const want = stored.has(hashHex(`t${x}`)) ? 'duplicate' : 'queued';
              if (b[k]!.status !== want) throw new Error(`push ${pushes}: t${x} is ${b[k]!.status}, the stored window says ${want}`);
            });
            if (JSON.stringify(verdicts(a)) !== JSON.stringify(verdicts(b))) {
              throw new Error(`verdicts differ at push ${pushes}: ${verdicts(a).join(',')} vs ${verdicts(b).join(',')}`);
            }
          };
          for (const op of ops) {
            if (op.kind === 'push') {
              await pushBoth(op.txns, op.part);
            } else if (op.kind === 'compact') {
              await compactAll(op.minTail, op.fanout, op.build, op.fanout * op.widen);
            } else if (op.kind === 'race') {
              // The push and the compaction run at once; only then is the twin pushed.
              const [a] = await Promise.all([cold.writer.push(op.txns.map((x) => item(qc, 'p0', `t${x}`))), compactAll(1, 2)]);
              const b = await plain.writer.push(op.txns.map((x) => item(qp, 'p0', `t${x}`)));
              pushes++;
              if (JSON.stringify(verdicts(a)) !== JSON.stringify(verdicts(b))) {
                throw new Error(`verdicts differ at racing push ${pushes}: ${verdicts(a).join(',')} vs ${verdicts(b).join(',')}`);
              }
            } else if (op.kind === 'window') {
              await sql.query('UPDATE queen.queues SET dedup_window_seconds = $2 WHERE name = ANY ($1)', [[qc, qp], op.seconds]);
            } else if (op.kind === 'age') {
              await sql.query(
                `UPDATE queen.log_txns SET created_at = created_at - interval '2 hours'
               WHERE partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = ANY ($1))`,
                [[qc, qp]],
              );
              for (const q of [qc, qp]) await syncSliceTimes(sql, await partitionIds(sql, q));
            } else {
              // Both twins hold the same offsets, so the same rows go: the first `rows` rows of each
              // partition, and txns_start past them (a row boundary, as retention leaves it).
              for (const q of [qc, qp]) {
                for (const pid of await partitionIds(sql, q)) {
                  await sql.query(
                    `WITH cut AS (
                     SELECT max(t.end_offset) + 1 AS start FROM (
                       SELECT end_offset FROM queen.log_txns WHERE partition_id = $1 ORDER BY end_offset LIMIT $2) t
                   ), gone AS (
                     DELETE FROM queen.log_txns x USING cut WHERE x.partition_id = $1 AND x.end_offset < cut.start
                   )
                   UPDATE queen.log_partitions lp SET txns_start = cut.start FROM cut WHERE lp.id = $1 AND cut.start IS NOT NULL`,
                    [pid, op.rows],
                  );
                }
              }
            }
          }
          const runs = await sql.query(
            `SELECT count(*)::int AS n FROM queen.log_hash_runs r
           JOIN queen.log_partitions lp ON lp.id = r.partition_id JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1`,
            [qc],
          );
          if (runs.rows[0].n > 0) fromRuns++;
        },
      ),
      { numRuns: 50 },
    );
    t.log(`${pushes} pushes compared; ${fromRuns} of 50 histories ended with runs`);
    t.true(fromRuns > 10, 'most histories had runs for v12 to read');
  },
);

test.serial('the compactor compacts a partition whose pushes probe a long tail, and its later probes read only the new tail', async (t) => {
  const w = await writer(t);
  const compactor = new Compactor({ pool: w.engine.pool, minTail: 100, fanout: 4, metrics: w.metrics, idleMs: 10 });
  t.context.compactors.push(compactor);
  compactOnLongProbes(w.engine, compactor, 100);
  await compactor.start();
  const q = 'compactor-trigger';
  const sent: string[] = [];
  for (let i = 0; i < 6; i++) {
    const batch = Array.from({ length: 40 }, (_, k) => `id-${i}-${k}`);
    sent.push(...batch);
    const rs = await w.writer.push(batch.map((x) => item(q, 'p', x)));
    t.true(rs.every((r) => r.status === 'queued'));
  }
  const [pid] = await partitionIds(t.context.sql, q);
  await waitFor('the compactor to raise compacted_upto past the probed tail', async () => {
    const r = await t.context.sql.query('SELECT compacted_upto FROM queen.log_partitions WHERE id = $1', [pid]);
    return Number(r.rows[0].compacted_upto) >= 159;
  });
  // Every earlier id re-sent: each is found (through the runs or the short tail) at its offset.
  const again = await w.writer.push(sent.map((x) => item(q, 'p', x)));
  t.deepEqual(
    again.map((r) => r.status),
    sent.map(() => 'duplicate'),
  );
  t.deepEqual(
    again.map((r) => r.offset),
    sent.map((_, i) => i),
  );
  const probe = w.metrics.counter('queen_compaction_steps_total', '', ['kind']).get('run');
  t.true(probe >= 1, 'a run was built');
});

test.serial(
  'merges go wide for a partition whose runs nobody searches and stay at the fan-out for one whose pushes search them',
  async (t) => {
    const w = await writer(t);
    // Pushes through a second engine are not seen by the compactor's feeds: a partition nobody searches, as far as it knows.
    const quietWriter = await writer(t);
    const compactor = new Compactor({ pool: w.engine.pool, minTail: 1, fanout: 2, metrics: w.metrics, loop: false, mergeEvidence: 100 });
    t.context.compactors.push(compactor);
    compactOnLongProbes(w.engine, compactor, 1);
    await compactor.start();
    const compactNow = async (pid: number) => {
      compactor.request(pid);
      while (compactor.pendingCount > 0) await compactor.runOnce();
    };
    const sent = { searched: [] as string[], quiet: [] as string[] };
    for (let i = 0; i < 16; i++) {
      for (const kind of ['searched', 'quiet'] as const) {
        const batch = Array.from({ length: 40 }, (_, k) => `${kind}-${i}-${k}`);
        sent[kind].push(...batch);
        // No cache: every push probes its whole window, runs included, and (through w) says so.
        const rs = await (kind === 'quiet' ? quietWriter : w).writer.push(batch.map((x) => item(kind, 'p', x)));
        t.true(rs.every((r) => r.status === 'queued'));
        const [pid] = await partitionIds(t.context.sql, kind);
        await compactNow(Number(pid));
      }
    }
    const [searched] = await partitionIds(t.context.sql, 'searched');
    const [quiet] = await partitionIds(t.context.sql, 'quiet');
    t.is(compactor.mergeWidthFor(Number(searched)), 2, 'searched by every push: the fan-out');
    t.is(compactor.mergeWidthFor(Number(quiet)), 2 * 4, 'never searched: four times it');
    t.true(w.metrics.counter('queen_compaction_wide_merges_total', '').get() >= 1, 'a wide merge ran');
    const runCount = async (pid: string) =>
      Number((await t.context.sql.query('SELECT count(*) AS n FROM queen.log_hash_runs WHERE partition_id = $1', [pid])).rows[0].n);
    t.log(`runs: searched ${await runCount(searched!)}, quiet ${await runCount(quiet!)}`);
    // Exact either way: every id re-sent is a duplicate of its own offset.
    for (const kind of ['searched', 'quiet'] as const) {
      const again = await w.writer.push(sent[kind].map((x) => item(kind, 'p', x)));
      t.deepEqual(
        again.map((r) => [r.status, r.offset]),
        sent[kind].map((_, i) => ['duplicate', i]),
      );
    }
  },
);
