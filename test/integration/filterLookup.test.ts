import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import fc from 'fast-check';
import pg from 'pg';
import { DedupCache } from '../../src/dedup/index.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { LogWriter, type PushItem, type PushResult } from '../../src/engine/writer.js';
import { CacheWatermarks } from '../../src/fusion/cacheWatermarks.js';
import type { LookupMode } from '../../src/fusion/lookupPlacement.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { HASH_BYTES, hashString, writeHashAt } from '../../src/util/txnHash.js';
import { NIL_UUID } from '../../src/util/uuidv7.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { syncSliceTimes } from '../helpers/sliceTimes.js';
import { tuplesRead } from '../helpers/tuplesRead.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';
import { compactPartition, type CompactionBuild } from '../../src/engine/compactionStore.js';

/**
 * The filter tier's lookup against real PostgreSQL (docs/deduplication.md,
 * "The filter tier and the lookup").
 *
 * First test: queen.log_lookup_v2's claim, on random histories with
 * compactions (runs), merges, pushes racing them, dedup switched off for a
 * while (one hash at several offsets), ageing and purges. After every step
 * some ids are looked up, every other time each with a span of offsets that
 * holds all its stored occurrences (as the broker's generations give it),
 * and the answer is checked against the stored window read with one plain
 * query: every name is an in-window occurrence at or below the returned
 * lastOffset, and each id's lowest one is named.
 *
 * Then the cache itself (CacheWatermarks) with the filter tier, at a cap
 * that holds the partitions only as filters, with compactions in between:
 * its verdicts equal those of a broker that always sends -1, whether its
 * maybe items are looked up apart or in the push's own call.
 */

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  engines: LogEngine[];
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('filterlookup');
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 4 }), engines: [] };
});
teardownAndCheckLeaks(test, async (t) => {
  await Promise.all(t.context.engines.map((e) => e.stop()));
  await t.context.sql?.end();
  await t.context.db?.drop();
});

async function engineOf(t: { context: Ctx }, metrics = new MetricsRegistry()): Promise<LogEngine> {
  const engine = new LogEngine({ connectionString: t.context.db.url, poolSize: 3, metrics });
  await engine.start();
  t.context.engines.push(engine);
  return engine;
}

const item = (queue: string, partition: string, txn: string): PushItem => ({
  queue,
  partition,
  transactionId: txn,
  payload: Buffer.from('{}'),
});
const verdicts = (rs: PushResult[]): string[] => rs.map((r) => `${r.status}@${r.offset}${r.id === NIL_UUID ? '/gone' : ''}`);

const hashOf = (txn: string): Buffer => {
  const b = Buffer.alloc(HASH_BYTES);
  writeHashAt(new DataView(b.buffer, b.byteOffset, HASH_BYTES), 0, hashString(txn));
  return b;
};

/** Every in-window occurrence of every stored hash of the partition: hex hash -> offsets (a plain query, no probe path). */
const storedWindow = async (sql: pg.Pool, pid: number): Promise<Map<string, number[]>> => {
  const r = await sql.query(
    `SELECT encode(th.h, 'hex') AS h, t.base_offset + th.idx AS off
     FROM queen.log_partitions lp
     JOIN queen.queues q ON q.id = lp.queue_id
     JOIN queen.log_txns t ON t.partition_id = lp.id
     CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
     WHERE lp.id = $1 AND q.dedup_window_seconds > 0
       AND t.end_offset >= lp.txns_start AND t.created_at >= now() - make_interval(secs => q.dedup_window_seconds)`,
    [pid],
  );
  const m = new Map<string, number[]>();
  for (const row of r.rows as { h: string; off: string }[]) {
    const l = m.get(row.h) ?? [];
    l.push(Number(row.off));
    m.set(row.h, l);
  }
  return m;
};

const partitionIds = async (sql: pg.Pool, queue: string): Promise<number[]> =>
  (
    await sql.query(
      'SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 ORDER BY lp.id',
      [queue],
    )
  ).rows.map((r: { id: string }) => Number(r.id));

type Op =
  | { kind: 'push'; txns: number[]; part: number }
  | { kind: 'compact'; minTail: number; fanout: number; build?: CompactionBuild; widen?: number }
  | { kind: 'race'; txns: number[] }
  | { kind: 'window'; seconds: number }
  | { kind: 'age' }
  | { kind: 'purge'; rows: number }
  | { kind: 'bulk' }
  | { kind: 'untime' };

/** A bulk push's ids: enough for a tail past 4 096 offsets (the lookup's hash-join search) until compacted. */
const BULK = Array.from({ length: 4500 }, (_, k) => 200 + k);

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('push' as const),
      txns: fc.oneof(
        fc.array(fc.integer({ min: 0, max: 120 }), { minLength: 1, maxLength: 12 }),
        fc.array(fc.integer({ min: 0, max: 120 }), { minLength: 33, maxLength: 80 }),
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
      // Either build of a step (the broker's, or log_compact_v1 as a broker before it runs it), mixed in one history.
      build: fc.constantFrom<CompactionBuild>('broker', 'sql'),
      // Merges of up to 3x the fan-out at once, as the compactor runs them where runs are rarely read (the broker build only).
      widen: fc.integer({ min: 1, max: 3 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('race' as const),
      txns: fc.array(fc.integer({ min: 0, max: 120 }), { minLength: 1, maxLength: 40 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('window' as const), seconds: fc.constantFrom(0, 3600) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('age' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('purge' as const), rows: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'bulk' as const }) },
  // Half the slices lose their times, as slices a broker of the previous release wrote (sql/000094).
  { weight: 1, arbitrary: fc.constant({ kind: 'untime' as const }) },
);

/** Applies a non-push op to the queues (compactions only to `compacted`). */
async function applyOp(sql: pg.Pool, op: Op, queues: string[], compacted: string[]): Promise<void> {
  if (op.kind === 'compact') {
    for (const q of compacted) {
      for (const pid of await partitionIds(sql, q))
        await compactPartition(sql, pid, op.minTail, op.fanout, op.build, op.fanout * (op.widen ?? 1));
    }
  } else if (op.kind === 'window') {
    await sql.query('UPDATE queen.queues SET dedup_window_seconds = $2 WHERE name = ANY ($1)', [queues, op.seconds]);
  } else if (op.kind === 'age') {
    await sql.query(
      `UPDATE queen.log_txns SET created_at = created_at - interval '2 hours'
       WHERE partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = ANY ($1))`,
      [queues],
    );
    for (const q of queues) await syncSliceTimes(sql, await partitionIds(sql, q));
  } else if (op.kind === 'untime') {
    await sql.query(
      `UPDATE queen.log_hash_slices s SET created_us = NULL
       FROM queen.log_hash_runs r JOIN queen.log_partitions lp ON lp.id = r.partition_id JOIN queen.queues q ON q.id = lp.queue_id
       WHERE s.run_id = r.run_id AND q.name = ANY ($1) AND s.bucket % 2 = 0`,
      [queues],
    );
  } else if (op.kind === 'purge') {
    for (const q of queues) {
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

test.serial(
  'log_lookup_v2 names only in-window occurrences and always the lowest, over runs and tail, with and without item spans (random histories)',
  async (t) => {
    const engine = await engineOf(t);
    const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined });
    const sql = t.context.sql;
    let round = 0;
    let lookups = 0;
    let named = 0;
    let fromRuns = 0;
    let withUntimed = 0;
    let longTails = 0;
    let fewInShortTails = 0;
    let joinedTails = 0;
    let spanned = 0;
    let tightSpans = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 4, maxLength: 30 }), fc.integer({ min: 0, max: 2 ** 31 }), async (ops, seed) => {
        round++;
        const q = `lookup${round}`;
        let pick = seed;
        const check = async (): Promise<void> => {
          const pids = await partitionIds(sql, q);
          if (pids.length === 0) return;
          // Ids to look up: a spread over everything that may have been sent, and some never sent.
          // 24 ids take the per-row search of a long tail, 48 the hash join, 2 the per-row search of any tail.
          const ids = Array.from({ length: [24, 48, 2][lookups % 3]! }, (_, k) => {
            pick = (pick * 1103515245 + 12345) % 2 ** 31;
            return k % 3 === 0 ? BULK[pick % BULK.length]! : pick % 140;
          });
          const before = await Promise.all(pids.map((pid) => storedWindow(sql, pid)));
          // Every other lookup gives each id a span holding all its stored
          // in-window occurrences (nothing is written during a check), from
          // tight to unbounded on either side; an id stored nowhere gets any
          // span, often one below the tail or between runs.
          const withSpans = lookups % 2 === 1;
          const spanOf = (occ: number[]): [number, number] => {
            pick = (pick * 1103515245 + 12345) % 2 ** 31;
            const r = pick % 8;
            if (occ.length === 0) return [r * 7, r % 2 === 0 ? Infinity : r * 7 + (pick % 40)];
            const lo = Math.min(...occ);
            const hi = Math.max(...occ);
            return [r < 2 ? 0 : Math.max(0, lo - (r % 3)), r === 7 ? Infinity : hi + (r % 3)];
          };
          const inputs = pids.map((pid, s) => {
            const base = { partitionId: pid, count: ids.length, hashes: Buffer.concat(ids.map((x) => hashOf(`t${x}`))) };
            if (!withSpans) return base;
            const spans = ids.map((x) => spanOf(before[s]!.get(hashOf(`t${x}`).toString('hex')) ?? []));
            tightSpans += spans.filter(([, to]) => to !== Infinity).length;
            return { ...base, from: spans.map(([from]) => from), to: spans.map(([, to]) => to) };
          });
          if (withSpans) spanned++;
          const out = await engine.lookup(inputs);
          const after = await Promise.all(pids.map((pid) => storedWindow(sql, pid)));
          lookups++;
          pids.forEach((pid, s) => {
            const o = out[s]!;
            if (o.tailOffsets > 4096) longTails++;
            if (o.tailOffsets > 4096 && ids.length > 32) joinedTails++;
            if (o.tailOffsets > 0 && o.tailOffsets <= 4096 && ids.length <= 2 && o.found.length > 0) fewInShortTails++;
            ids.forEach((x, k) => {
              const hex = hashOf(`t${x}`).toString('hex');
              const got = o.found.filter((f) => f.index === k).map((f) => f.offset);
              named += got.length;
              // Nothing changes the stored window during a check but the lookup's own snapshot, so before == after.
              const want = (before[s]!.get(hex) ?? []).filter((off) => off <= o.lastOffset);
              const still = after[s]!.get(hex) ?? [];
              for (const off of got) {
                if (!want.includes(off) && !still.includes(off)) {
                  throw new Error(`partition ${pid}: t${x} named at ${off}, which holds no in-window occurrence`);
                }
              }
              if (want.length > 0 && !got.includes(Math.min(...want))) {
                throw new Error(
                  `partition ${pid}: t${x}'s lowest in-window occurrence ${Math.min(...want)} not named (got ${got.join(',')})`,
                );
              }
            });
          });
          const runs = await sql.query(
            `SELECT count(*)::int AS n, count(*) FILTER (WHERE s.created_us IS NULL)::int AS untimed
           FROM queen.log_hash_runs r JOIN queen.log_hash_slices s ON s.run_id = r.run_id WHERE r.partition_id = ANY ($1)`,
            [pids],
          );
          const { n, untimed } = runs.rows[0] as { n: number; untimed: number };
          if (n > 0) fromRuns++;
          if (untimed > 0 && untimed < n) withUntimed++;
        };
        for (const op of ops) {
          if (op.kind === 'push') {
            await writer.push(op.txns.map((x) => item(q, `p${op.part}`, `t${x}`)));
          } else if (op.kind === 'bulk') {
            await writer.push(BULK.map((x) => item(q, 'p1', `t${x}`)));
          } else if (op.kind === 'race') {
            await Promise.all([
              writer.push(op.txns.map((x) => item(q, 'p0', `t${x}`))),
              applyOp(sql, { kind: 'compact', minTail: 1, fanout: 2 }, [q], [q]),
            ]);
          } else {
            await applyOp(sql, op, [q], [q]);
          }
          await check();
        }
      }),
      { numRuns: 40 },
    );
    t.log(
      `${lookups} lookups, ${named} names; ${fromRuns} of them with runs to read, ${withUntimed} with slices with and without times; ${longTails} partitions searched through a long tail, ${joinedTails} of them hash-joined; ${fewInShortTails} two-item lookups with names and a short tail; ${spanned} with item spans, ${tightSpans} items bounded above`,
    );
    t.true(spanned > lookups / 3 && tightSpans > 0, 'many lookups searched each id in its span only');
    t.true(named > 0 && fromRuns > lookups / 4, 'lookups found occurrences, many through runs');
    t.true(withUntimed > 0, 'some lookups read slices with times and slices without');
    t.true(longTails > joinedTails && joinedTails > 0, 'long tails were searched both per row (few items) and hash-joined (many)');
    t.true(fewInShortTails > 0, 'two-item lookups found occurrences through short tails (the per-row search)');
  },
);

test.serial(
  'log_lookup_v1 names the lowest occurrence when runs interleave: a merged run spans one written between its parts',
  async (t) => {
    const engine = await engineOf(t);
    const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined });
    const sql = t.context.sql;
    const q = 'interleave';
    const push = async (txns: string[]): Promise<void> => {
      await writer.push(txns.map((x) => item(q, 'p0', x)));
    };
    const [pid] = await (async () => {
      await push(['y']); // offset 0
      return partitionIds(sql, q);
    })();
    const compact = (): Promise<unknown> => compactPartition(sql, pid!, 1, 2);
    await compact(); // a run of level 0 over offset 0
    // Dedup off for a while, so x is stored at several offsets.
    await applyOp(sql, { kind: 'window', seconds: 0 }, [q], [q]);
    await push(['f1', 'f2', 'x', 'f3', 'x', 'f4', 'f5', 'f6']); // offsets 1..8, x at 3 and 5
    await compact(); // eight offsets at once: a run of level 3 over (0, 8]
    await push(['x']); // offset 9
    await compact(); // a run of level 0 over (8, 9]
    await compact(); // the two of level 0 merged: a run over (-1, 9] holding 0 and 9, spanning the level-3 run
    await applyOp(sql, { kind: 'window', seconds: 3600 }, [q], [q]);

    const runs = (
      await sql.query('SELECT run_lo, run_hi FROM queen.log_hash_runs WHERE partition_id = $1 ORDER BY run_lo', [pid])
    ).rows.map((r: { run_lo: string; run_hi: string }) => [Number(r.run_lo), Number(r.run_hi)]);
    t.deepEqual(
      runs,
      [
        [-1, 9],
        [0, 8],
      ],
      'the merged run starts first and spans the other',
    );

    const ids = ['x', 'y', 'f3', 'never-sent'];
    const [o] = await engine.lookup([{ partitionId: pid!, count: ids.length, hashes: Buffer.concat(ids.map(hashOf)) }]);
    const lowest = (k: number): number | undefined => {
      const offs = o!.found.filter((f) => f.index === k).map((f) => f.offset);
      return offs.length === 0 ? undefined : Math.min(...offs);
    };
    // x: the first run by run_lo holds it at 9, the one it spans at 3 and 5.
    t.is(lowest(0), 3, 'x is named at its lowest offset, in the run the merged one spans');
    t.is(lowest(1), 0);
    t.is(lowest(2), 4);
    t.is(lowest(3), undefined);
    for (const f of o!.found) t.true([0, 3, 4, 5, 9].includes(f.offset), `offset ${f.offset} holds no looked-up id`);
  },
);

test.serial(
  "a lookup answered by runs decides the window from the slices' times, reading no log_txns row; without times it reads one per candidate",
  async (t) => {
    const engine = await engineOf(t);
    const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined });
    const sql = t.context.sql;
    const q = 'slicetimes';
    for (let k = 0; k < 4; k++) await writer.push(Array.from({ length: 50 }, (_, i) => item(q, 'p0', `s${k * 50 + i}`)));
    const [pid] = await partitionIds(sql, q);
    // Everything compacted: no tail left, every answer comes from the runs.
    await compactPartition(sql, pid!, 1, 2, 'broker');
    const ids = Array.from({ length: 60 }, (_, k) => `s${k * 3}`).concat(['never-sent']);
    const lookup = () =>
      tuplesRead(
        sql,
        'queen.log_txns',
        'SELECT found_idx, found_offsets, tail_offsets FROM queen.log_lookup_v1($1::bigint[], $2::integer[], $3::bytea)',
        [[pid], [ids.length], Buffer.concat(ids.map(hashOf))],
      );
    const foundOf = (rows: Record<string, unknown>[]): string[] => {
      const r = rows[0] as { found_idx: number[] | null; found_offsets: string[] | null; tail_offsets: string };
      t.is(Number(r.tail_offsets), 0, 'nothing left in the tail');
      return (r.found_idx ?? []).map((i, k) => `${ids[i]}@${r.found_offsets![k]}`);
    };
    // Each id sK was pushed alone at offset K.
    const want = ids.slice(0, 60).map((x) => `${x}@${x.slice(1)}`);

    const timed = await lookup();
    t.deepEqual(foundOf(timed.rows), want);
    t.is(timed.tuplesRead, 0, 'the window was decided from the slices');

    // Slices without times (as a broker of the previous release writes them): the same answer, each candidate's row read back.
    await sql.query(
      'UPDATE queen.log_hash_slices s SET created_us = NULL FROM queen.log_hash_runs r WHERE s.run_id = r.run_id AND r.partition_id = $1',
      [pid],
    );
    const untimed = await lookup();
    t.deepEqual(foundOf(untimed.rows), want);
    t.true(untimed.tuplesRead >= 60, `one log_txns row per candidate at least (read ${untimed.tuplesRead})`);

    // Times again (a merge-free rebuild), then every row out of the window: nothing named, still no row read for the runs' candidates.
    await sql.query('DELETE FROM queen.log_hash_slices s USING queen.log_hash_runs r WHERE s.run_id = r.run_id AND r.partition_id = $1', [
      pid,
    ]);
    await sql.query('DELETE FROM queen.log_hash_runs WHERE partition_id = $1', [pid]);
    await sql.query('UPDATE queen.log_partitions SET compacted_upto = -1 WHERE id = $1', [pid]);
    await compactPartition(sql, pid!, 1, 2, 'sql');
    await sql.query(`UPDATE queen.log_txns SET created_at = created_at - interval '2 hours' WHERE partition_id = $1`, [pid]);
    await syncSliceTimes(sql, [pid!]);
    const aged = await lookup();
    t.deepEqual(foundOf(aged.rows), []);
    t.is(aged.tuplesRead, 0, "out of the window by the slices' times alone");
  },
);

test.serial(
  'an item span reads only the runs holding some of its offsets, and an item whose span ends below the tail does not search it',
  async (t) => {
    const engine = await engineOf(t);
    const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined });
    const sql = t.context.sql;
    const q = 'itemspans';
    // Four runs of 50 offsets each, (-1, 49] .. (149, 199] (a fan-out no
    // step reaches: never merged), then 50 offsets left in the tail.
    for (let k = 0; k < 5; k++) {
      await writer.push(Array.from({ length: 50 }, (_, i) => item(q, 'p0', `s${k * 50 + i}`)));
      const [pid] = await partitionIds(sql, q);
      if (k < 4) await compactPartition(sql, pid!, 1, 64, 'broker');
    }
    const [pid] = await partitionIds(sql, q);
    const runs = (
      await sql.query('SELECT run_lo, run_hi FROM queen.log_hash_runs WHERE partition_id = $1 ORDER BY run_lo', [pid])
    ).rows.map((r: { run_lo: string; run_hi: string }) => `${r.run_lo}..${r.run_hi}`);
    t.deepEqual(runs, ['-1..49', '49..99', '99..149', '149..199']);
    const ids = ['s10', 's120', 's230', 'never-sent'];
    const call = (table: string, names: string[], from: (number | null)[] | null, to: (number | null)[] | null) =>
      tuplesRead(
        sql,
        table,
        'SELECT found_idx, found_offsets FROM queen.log_lookup_v2($1::bigint[], $2::integer[], $3::bytea, $4::bigint[], $5::bigint[])',
        [[pid], [names.length], Buffer.concat(names.map(hashOf)), from, to],
      );
    const found = (rows: Record<string, unknown>[]): string[] => {
      const r = rows[0] as { found_idx: number[] | null; found_offsets: string[] | null };
      return (r.found_idx ?? []).map((i, k) => `${ids[i]}@${r.found_offsets![k]}`);
    };
    const want = ['s10@10', 's120@120', 's230@230'];

    const whole = await call('queen.log_hash_slices', ids, null, null);
    t.deepEqual(found(whole.rows), want);
    // Spans: s10 in the first run, s120 in the third, s230 in the tail, the
    // unsent id in the first run's offsets only.
    const spans = { from: [0, 100, 200, 0], to: [49, 149, null, 49] };
    const narrow = await call('queen.log_hash_slices', ids, spans.from, spans.to);
    t.deepEqual(found(narrow.rows), want, 'the same names');
    t.is(narrow.tuplesRead, 3, 'one slice for each item the runs may hold, none for the tail item');
    t.true(whole.tuplesRead >= 3 + 4 + 4, `without spans the later items read every run (${whole.tuplesRead} slices)`);

    // The tail: an item whose span ends at or below compacted_upto (199)
    // reads no log_txns row; without its span it searches the tail's rows.
    const tailWhole = await call('queen.log_txns', ['never-sent'], null, null);
    const tailSkipped = await call('queen.log_txns', ['never-sent'], [0], [199]);
    t.true(tailWhole.tuplesRead > 0, `the tail searched without a span (${tailWhole.tuplesRead} rows)`);
    t.is(tailSkipped.tuplesRead, 0, 'no tail row read for a span that ends below it');

    // Spans that do not match the items are refused.
    await t.throwsAsync(call('queen.log_hash_slices', ids, [0], null), { message: /item spans do not match/ });
  },
);

test.serial('log_lookup_v1 answers each segment for its own partition, whatever order the partitions come in', async (t) => {
  const engine = await engineOf(t);
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined });
  const sql = t.context.sql;
  const q = 'segorder';
  // Partition k holds k + 1 messages: ids o<k>-0 .. o<k>-k at offsets 0..k.
  const parts = 40;
  for (let k = 0; k < parts; k++) await writer.push(Array.from({ length: k + 1 }, (_, i) => item(q, `p${k}`, `o${k}-${i}`)));
  const byName = new Map(
    (
      await sql.query('SELECT lp.name, lp.id FROM queen.log_partitions lp JOIN queen.queues qu ON qu.id = lp.queue_id WHERE qu.name = $1', [
        q,
      ])
    ).rows.map((r: { name: string; id: string }) => [r.name, Number(r.id)]),
  );
  // Segments in a shuffled order (ids neither ascending nor descending), each asking for its last id and one never sent.
  const order = Array.from({ length: parts }, (_, k) => (k * 17) % parts);
  const inputs = order.map((k) => ({
    partitionId: byName.get(`p${k}`)!,
    count: 2,
    hashes: Buffer.concat([hashOf(`o${k}-${k}`), hashOf(`never-${k}`)]),
  }));
  const out = await engine.lookup(inputs);
  order.forEach((k, s) => {
    t.is(out[s]!.lastOffset, k, `segment ${s} reads partition p${k}'s allocator`);
    t.deepEqual(out[s]!.found, [{ index: 0, offset: k }], `segment ${s} finds p${k}'s last id at its offset`);
  });
});

/**
 * The cache with the filter tier against a broker that always sends -1, its
 * maybe items looked up `mode`: apart (a lookup call before the push), in
 * the push's own call (queen.log_push_looked_v1: a segment whose lookup
 * finds something goes with the full probe and again), or placed per
 * partition by what its lookups found.
 */
async function filterTierVerdicts(t: ExecutionContext<Ctx>, mode: LookupMode, numRuns: number): Promise<void> {
  const cache = new DedupCache({ capBytes: 16 * 1024, filterTier: true });
  const metrics = new MetricsRegistry();
  const engine = await engineOf(t, metrics);
  // Segments looked up in the push's call, by whether the lookup found something.
  const inPush = { found: 0, empty: 0 };
  const pushSegments = engine.pushSegments.bind(engine);
  engine.pushSegments = async (segments, via) => {
    const out = await pushSegments(segments, via);
    for (const o of out) if (o.lookupFound !== undefined) inPush[o.lookupFound > 0 ? 'found' : 'empty']++;
    return out;
  };
  const cached = new LogWriter(engine, {
    maxPayloadBytes: 1024,
    metadataTtlMs: 0,
    watermarks: new CacheWatermarks(cache, engine, metrics, undefined, true, undefined, mode),
  });
  const plainEngine = await engineOf(t);
  const plain = new LogWriter(plainEngine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: undefined });
  const sql = t.context.sql;
  let round = 0;
  let pushes = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { minLength: 4, maxLength: 24 }), async (ops) => {
      round++;
      const qa = `filtera${mode}${round}`;
      const qb = `filterb${mode}${round}`;
      // Each round starts with partitions too big for the exact tier at this cap.
      const big = Array.from({ length: 1500 }, (_, i) => 1000 + i);
      const prefix: Op[] = [
        { kind: 'push', txns: big, part: 0 },
        { kind: 'push', txns: big, part: 1 },
      ];
      for (const op of [...prefix, ...ops]) {
        if (op.kind === 'push' || op.kind === 'race' || op.kind === 'bulk') {
          const part = op.kind === 'push' ? op.part : op.kind === 'bulk' ? 1 : 0;
          const txns = (op.kind === 'bulk' ? BULK : op.txns).map((x) => `t${x}`);
          const [a] = await Promise.all([
            cached.push(txns.map((x) => item(qa, `p${part}`, x))),
            op.kind === 'race' ? applyOp(sql, { kind: 'compact', minTail: 1, fanout: 2 }, [qa], [qa]) : Promise.resolve(),
          ]);
          const b = await plain.push(txns.map((x) => item(qb, `p${part}`, x)));
          pushes++;
          if (JSON.stringify(verdicts(a)) !== JSON.stringify(verdicts(b))) {
            throw new Error(`verdicts differ at ${JSON.stringify(op)}: ${verdicts(a).join(',')} vs ${verdicts(b).join(',')}`);
          }
        } else {
          await applyOp(sql, op, [qa, qb], [qa]);
        }
      }
    }),
    { numRuns },
  );
  const lookups = metrics.counter('queen_lookup_total', '').get();
  const found = metrics.counter('queen_lookup_found_total', '').get();
  t.log(
    `${pushes} pushes compared; ${lookups} lookups finding ${found}; in the push, segments whose lookup found something ${inPush.found}, nothing ${inPush.empty}; ${JSON.stringify(cache.stats)}`,
  );
  if (mode === 'apart') t.deepEqual(inPush, { found: 0, empty: 0 }, 'nothing looked up in the push');
  else t.true(inPush.found > 0 && inPush.empty > 0, 'looked up in the push: both the full probe and the narrowed vouch ran');
  // A filter entry arises two ways: hydrated as one (a partition whose size the
  // policy already knows) or demoted from exact. Which one a random history
  // takes varies (0-10 hydrated as filters in three runs); either is the tier under test.
  t.true(cache.stats.filterInstalls + cache.stats.demotions > 0, 'filter entries were installed (hydrated as filters or demoted)');
  t.true(cache.stats.vouched > 0 && cache.stats.maybeItems > 0, 'filter entries vouched and had maybe items');
  t.true(lookups > 0 && found > 0, 'lookups ran and found occurrences');
}

test.serial(
  'the cache with the filter tier, at a cap that holds the partitions only as filters: verdicts equal -1 verdicts (lookups apart)',
  (t) => filterTierVerdicts(t, 'apart', 30),
);
test.serial("the same, each maybe item looked up in the push's own call", (t) => filterTierVerdicts(t, 'in-push', 30));
test.serial('the same, lookups placed per partition by what they found', (t) => filterTierVerdicts(t, 'adaptive', 15));

test.serial(
  'a lookup that fails: its segments go with the full probe, verdicts stay exact, the failure is counted and named a lookup',
  async (t) => {
    const cache = new DedupCache({ capBytes: 16 * 1024, filterTier: true });
    const metrics = new MetricsRegistry();
    const engine = await engineOf(t, metrics);
    const reported: string[] = [];
    // Lookups apart: the injected fault is at the lookup call of their own.
    const watermarks = new CacheWatermarks(cache, engine, metrics, (_err, _pid, what) => reported.push(what), true, undefined, 'apart');
    const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks });
    // PostgreSQL refusing the lookup statement alone (the push still runs): the
    // fault is injected at the engine's lookup, the one call that fails.
    let failLookups = false;
    const lookup = engine.lookup.bind(engine);
    engine.lookup = (inputs) => (failLookups ? Promise.reject(new Error('lookup refused (injected)')) : lookup(inputs));
    const q = 'lookupfails';
    // Two partitions too big for the exact tier at this cap: they end as filters.
    const big = Array.from({ length: 1500 }, (_, i) => `b${i}`);
    for (const part of ['p0', 'p1']) {
      const rs = await writer.push(big.map((x) => item(q, part, x)));
      t.true(rs.every((r) => r.status === 'queued'));
    }
    failLookups = true;
    const failures = () => metrics.counter('queen_lookup_failures_total', '').get();
    // Each round re-sends 50 stored ids and sends 50 new ones, until a lookup
    // was asked for (the partitions' filters built): every verdict is checked.
    for (let round = 0; round < 20 && failures() === 0; round++) {
      await watermarks.builds.idle();
      const resent = big.slice(round * 50, round * 50 + 50);
      const fresh = Array.from({ length: 50 }, (_, i) => `n${round}-${i}`);
      const rs = await writer.push([...resent, ...fresh].map((x) => item(q, 'p0', x)));
      t.deepEqual(
        rs.map((r) => r.status),
        [...resent.map(() => 'duplicate'), ...fresh.map(() => 'queued')],
        `round ${round}`,
      );
      // Each duplicate names its original: p0's offset of that id.
      rs.slice(0, 50).forEach((r, i) => t.is(r.offset, round * 50 + i));
    }
    t.true(failures() > 0, 'a lookup was asked for and failed');
    t.true(reported.length > 0 && reported.every((w) => w === 'lookup'), `reported: ${reported.join(',')}`);
  },
);
