import type pg from 'pg';
import copyStreams from 'pg-copy-streams';
import { HASH_BYTES } from '../util/txnHash.js';
import { BinaryCopyReader, BinaryCopyWriter, readInt8, readInt8Array } from './binaryCopy.js';
import { buildSlices, runBits, runLevel, type Slice } from './hashRunSlices.js';
import { toDatabaseError } from './sqlstate.js';

const { to: copyTo, from: copyFrom } = copyStreams;

/** What one compaction call did (sql/functions/compaction.sql). */
export interface CompactionOutcome {
  /** Hashes written into a new run (0: the tail was under the minimum). */
  compacted: number;
  /** Hashes rewritten by a merge of runs (0: no tier had enough runs). */
  merged: number;
  /** Runs that merge replaced (0 without a merge). */
  mergedRuns: number;
  /** Runs dropped because retention removed every row they were built from. */
  dropped: number;
  /** The new run stopped short of last_offset at the step's pair bound: more is left to compact. */
  more: boolean;
}

const COMPACT_SQL = 'SELECT compacted, merged, dropped FROM queen.log_compact_v1($1::bigint, $2::integer, $3::integer)';

/**
 * One partition's compaction step, as queen.log_compact_v1 runs it, in its
 * own (autocommit) transaction: a new run of the rows above compacted_upto
 * if at least `minTail` offsets are there, at most one merge of `fanout`
 * runs, and the drop of purged runs.
 * SQLSTATE 40001 (another compactor raised compacted_upto meanwhile) comes
 * back as a retriable error.
 */
export async function compactPartitionInSql(
  pool: pg.Pool,
  partitionId: number,
  minTail: number,
  fanout: number,
): Promise<CompactionOutcome> {
  try {
    const r = await pool.query({ name: 'queen_log_compact_v1', text: COMPACT_SQL, values: [partitionId, minTail, fanout] });
    const row = r.rows[0] as { compacted: string; merged: string; dropped: number };
    const merged = Number(row.merged);
    return { compacted: Number(row.compacted), merged, mergedRuns: merged > 0 ? fanout : 0, dropped: row.dropped, more: false };
  } catch (err) {
    throw toDatabaseError(err, `compacting partition ${partitionId}`);
  }
}

/** Which of the two builds of the same step a compactor runs (both are exact; they write the same runs). */
export type CompactionBuild = 'broker' | 'sql';

/**
 * One partition's compaction step by the chosen build. `mergeWidth` (at
 * least `fanout`; src/compaction/mergeWidth.ts chooses it) is how many runs
 * of one tier the broker build merges; the SQL build, the reference, always
 * merges `fanout`.
 */
export function compactPartition(
  pool: pg.Pool,
  partitionId: number,
  minTail: number,
  fanout: number,
  build: CompactionBuild = 'broker',
  mergeWidth = fanout,
): Promise<CompactionOutcome> {
  return build === 'sql'
    ? compactPartitionInSql(pool, partitionId, minTail, fanout)
    : compactPartitionInBroker(pool, partitionId, minTail, fanout, MAX_STEP_PAIRS, MAX_STEP_PAIRS, mergeWidth);
}

const STATE_SQL = 'SELECT lp.compacted_upto, lp.last_offset, lp.txns_start FROM queen.log_partitions lp WHERE lp.id = $1';
// The lowest level with enough runs to merge, and how many to merge: the
// merge width ($2), narrowed for a level whose runs are too large to merge
// that many within the step's pair bound ($3), down to the fan-out ($4).
// Levels whose runs are too large to merge even `fanout` at once stay as
// they are: max(n) x width bounds the pairs a merge reads. At width =
// fanout this is the fan-out's rule alone.
const MERGE_LEVEL_SQL = `SELECT x.level, x.width FROM (
    SELECT r.level, count(*) AS runs, max(r.n) AS max_n,
           LEAST($2::bigint, GREATEST($4::bigint, $3::bigint / GREATEST(max(r.n), 1))) AS width
    FROM queen.log_hash_runs r WHERE r.partition_id = $1 GROUP BY r.level
  ) x WHERE x.runs >= x.width AND x.max_n * x.width <= $3 ORDER BY x.level LIMIT 1`;
// The end of the last row whose pairs, counted from compacted_upto, stay
// within the bound (at least the first row's: a row holds at most a few
// hundred frames).
const CUT_SQL = `SELECT coalesce(max(x.end_offset) FILTER (WHERE x.upto <= $4), min(x.end_offset)) AS cut FROM (
    SELECT t.end_offset, sum(t.end_offset - t.base_offset + 1) OVER (ORDER BY t.end_offset) AS upto
    FROM queen.log_txns t WHERE t.partition_id = $1 AND t.end_offset > $2 AND t.end_offset <= $3
  ) x`;
// The oldest runs of the level, locked: a run another merge took meanwhile is
// gone from the locked set (and then nothing is merged).
const LOCK_RUNS_SQL = `SELECT k.run_id, k.run_lo, k.run_hi, k.n FROM (
    SELECT r.run_id, r.run_lo, r.run_hi, r.n FROM queen.log_hash_runs r
    WHERE r.partition_id = $1 AND r.level = $2 ORDER BY r.run_hi LIMIT $3 FOR UPDATE
  ) k ORDER BY k.run_hi`;
const INSERT_RUN_SQL = `INSERT INTO queen.log_hash_runs (partition_id, run_lo, run_hi, bits, n, level)
  VALUES ($1, $2, $3, $4, $5, $6) RETURNING run_id`;
const DELETE_MERGED_SQL = `WITH s AS (DELETE FROM queen.log_hash_slices s WHERE s.run_id = ANY ($1::bigint[]))
  DELETE FROM queen.log_hash_runs r WHERE r.run_id = ANY ($1::bigint[])`;
const DROP_GONE_SQL = `WITH gone AS (
    DELETE FROM queen.log_hash_runs r WHERE r.partition_id = $1 AND r.run_hi < $2 RETURNING r.run_id
  ), slices AS (
    DELETE FROM queen.log_hash_slices s USING gone g WHERE s.run_id = g.run_id
  )
  SELECT count(*)::integer AS dropped FROM gone`;
const RAISE_SQL = 'UPDATE queen.log_partitions lp SET compacted_upto = $2 WHERE lp.id = $1 AND lp.compacted_upto = $3';
// COPY takes no bind parameters: the values travel in transaction-local
// settings set by a parameterised set_config(), never spliced into the text.
const SET_SQL = `SELECT set_config('queen.compact_partition', $1::text, true),
  set_config('queen.compact_from', $2::text, true), set_config('queen.compact_to', $3::text, true),
  set_config('queen.compact_runs', $4::text, true)`;
const COPY_ROWS_SQL = `COPY (
  SELECT t.base_offset, t.hashes, (extract(epoch FROM t.created_at) * 1000000)::bigint FROM queen.log_txns t
  WHERE t.partition_id = current_setting('queen.compact_partition')::bigint
    AND t.end_offset > current_setting('queen.compact_from')::bigint
    AND t.end_offset <= current_setting('queen.compact_to')::bigint
  ORDER BY t.end_offset
) TO STDOUT (FORMAT binary)`;
const COPY_SLICES_OUT_SQL = `COPY (
  SELECT s.hashes, s.offs, s.created_us FROM queen.log_hash_slices s
  WHERE s.run_id = ANY (current_setting('queen.compact_runs')::bigint[])
) TO STDOUT (FORMAT binary)`;
const COPY_SLICES_IN_SQL = 'COPY queen.log_hash_slices (run_id, bucket, hashes, offs, created_us) FROM STDIN (FORMAT binary)';

/**
 * The most (hash, offset) pairs one broker step reads, for a new run or a
 * merge: the broker holds about 100 bytes a pair while it sorts them (the
 * pairs, their slices and the COPY buffer), so ~100 MB at most. A merge
 * over the bound is not made (those runs stay at their level); a new run
 * over it is cut at a row's end and the rest left to the next step.
 */
export const MAX_STEP_PAIRS = 1 << 20;

/**
 * The same step as compactPartitionInSql, with the pairs sorted into slices
 * here instead of by PostgreSQL's executor (measured in the soak at the
 * service's defaults: ~3 us of database CPU a hash for each build and merge,
 * the largest cost of a window beyond the budget). One transaction, the same
 * statements' effects in the same order, so log_compact_v1's argument holds
 * word for word (sql/functions/compaction.sql):
 *   * a merge locks the oldest `fanout` runs of the lowest level that has as
 *     many, writes their union (every pair of their slices, read after the
 *     lock) as one run of the next level, and deletes them, all in this
 *     transaction: a reader sees them or the union;
 *   * runs wholly below the purge watermark are dropped;
 *   * a new run holds every hash of the log_txns rows ending in
 *     (compacted_upto, last_offset], read after last_offset was read
 *     committed (READ COMMITTED: a new snapshot per statement, and those rows
 *     no longer change), and compacted_upto is raised from the value read
 *     only if no other compactor raised it meanwhile, else the whole step
 *     rolls back (SQLSTATE 40001, retriable).
 * Where they differ: a step holds at most `maxPairs` pairs (MAX_STEP_PAIRS),
 * so a merge over the bound is skipped and a new run over it stops at a
 * row's end, `more` telling the caller to come back; log_compact_v1 sorts
 * any size inside the database. `maxNewPairs` (at most `maxPairs`) bounds a
 * new run alone, so a caller can build runs in the sizes the write path
 * would have (a bench loading a window at once, to start from the runs a
 * partition holds in its steady state) while merges still reach `maxPairs`.
 * The commit is asynchronous, as log_compact_v1's.
 * The partition row is locked only by the final UPDATE, one round trip
 * before the commit.
 * `mergeWidth` (default `fanout`) runs are merged at once, fewer (down to
 * `fanout`) where that many would exceed `maxPairs`. A merge wider than
 * `fanout` writes a run whose size may skip a tier, so its level is the
 * tier its size falls in (runLevel, as a new run's), never below the merged
 * level + 1; at `fanout` it is level + 1, as log_compact_v1 writes it. Which
 * runs merge is policy: the argument above holds for any width.
 */
export async function compactPartitionInBroker(
  pool: pg.Pool,
  partitionId: number,
  minTail: number,
  fanout: number,
  maxPairs = MAX_STEP_PAIRS,
  maxNewPairs = maxPairs,
  mergeWidth = fanout,
): Promise<CompactionOutcome> {
  if (!(minTail >= 1) || !(fanout >= 2)) throw new RangeError('compactPartition: minTail must be >= 1 and fanout >= 2');
  if (!(Number.isInteger(mergeWidth) && mergeWidth >= fanout))
    throw new RangeError('compactPartition: mergeWidth must be an integer >= fanout');
  if (!(maxPairs >= 1000)) throw new RangeError('compactPartition: maxPairs must be >= 1000');
  if (!(maxNewPairs >= 1 && maxNewPairs <= maxPairs)) throw new RangeError('compactPartition: maxNewPairs must be in [1, maxPairs]');
  const client = await pool.connect();
  // Only a step this function rolled back itself returns its client to the pool.
  let rolledBack = false;
  let committed = false;
  try {
    // Runs are derived data: losing the commit loses the run and the raised compacted_upto together.
    await client.query('BEGIN; SET LOCAL synchronous_commit = off');
    const out: CompactionOutcome = { compacted: 0, merged: 0, mergedRuns: 0, dropped: 0, more: false };
    const st = await client.query({ name: 'queen_compact_state', text: STATE_SQL, values: [partitionId] });
    if (st.rowCount === 0) {
      await client.query('COMMIT');
      committed = true;
      return out;
    }
    const cmp = Number(st.rows[0].compacted_upto);
    let last = Number(st.rows[0].last_offset);
    const start = Number(st.rows[0].txns_start);

    const lvl = await client.query({
      name: 'queen_compact_merge_level_v2',
      text: MERGE_LEVEL_SQL,
      values: [partitionId, mergeWidth, maxPairs, fanout],
    });
    if (lvl.rowCount !== 0) {
      const level = Number(lvl.rows[0].level);
      const width = Number(lvl.rows[0].width);
      const locked = await client.query({ name: 'queen_compact_lock_runs', text: LOCK_RUNS_SQL, values: [partitionId, level, width] });
      if (locked.rowCount === width) {
        const rows = locked.rows as { run_id: string; run_lo: string; run_hi: string; n: string }[];
        const ids = rows.map((r) => r.run_id);
        const n = rows.reduce((a, r) => a + Number(r.n), 0);
        const lo = Math.min(...rows.map((r) => Number(r.run_lo)));
        const hi = Math.max(...rows.map((r) => Number(r.run_hi)));
        await client.query({ name: 'queen_compact_set', text: SET_SQL, values: [String(partitionId), '0', '0', `{${ids.join(',')}}`] });
        const pairs = await copyOut(client, COPY_SLICES_OUT_SQL, 3, (f) => ({
          hashes: f[0]!,
          offs: readInt8Array(f[1]!),
          createdUs: f[2] === null ? null : readInt8Array(f[2]!),
        }));
        const bits = runBits(n);
        const mergedLevel = width === fanout ? level + 1 : Math.max(level + 1, runLevel(n, minTail, fanout));
        await writeRun(client, partitionId, lo, hi, bits, n, mergedLevel, buildSlices(pairs, bits));
        await client.query({ name: 'queen_compact_delete_merged', text: DELETE_MERGED_SQL, values: [`{${ids.join(',')}}`] });
        out.merged = n;
        out.mergedRuns = width;
      }
    }

    const gone = await client.query({ name: 'queen_compact_drop_gone', text: DROP_GONE_SQL, values: [partitionId, start] });
    out.dropped = Number(gone.rows[0].dropped);

    if (last - cmp >= minTail) {
      // Bounded, so the broker never holds more than maxPairs pairs: a long
      // tail is compacted in several steps, each raising compacted_upto to a
      // row's end (the split stays exact) and asking for the next.
      if (last - cmp > maxNewPairs) {
        const c = await client.query({ name: 'queen_compact_cut', text: CUT_SQL, values: [partitionId, cmp, last, maxNewPairs] });
        const cut = c.rows[0].cut === null ? last : Number(c.rows[0].cut);
        if (cut < last) {
          last = cut;
          out.more = true;
        }
      }
      await client.query({ name: 'queen_compact_set', text: SET_SQL, values: [String(partitionId), String(cmp), String(last), '{}'] });
      const rows = await copyOut(client, COPY_ROWS_SQL, 3, (f) => {
        const hashes = f[1]!;
        const base = readInt8(f[0]!, 0);
        const at = readInt8(f[2]!, 0);
        const offs = new Array<number>(hashes.length / HASH_BYTES);
        for (let i = 0; i < offs.length; i++) offs[i] = base + i;
        return { hashes, offs, createdUs: new Array<number>(offs.length).fill(at) };
      });
      const n = rows.reduce((a, r) => a + r.offs.length, 0);
      // No rows left there (retention removed them): nothing to hold.
      if (n > 0) {
        const bits = runBits(n);
        await writeRun(client, partitionId, cmp, last, bits, n, runLevel(n, minTail, fanout), buildSlices(rows, bits));
      }
      const raised = await client.query({ name: 'queen_compact_raise', text: RAISE_SQL, values: [partitionId, last, cmp] });
      if (raised.rowCount === 0) {
        await client.query('ROLLBACK');
        rolledBack = true;
        throw Object.assign(new Error(`partition ${partitionId} was compacted concurrently`), { code: '40001' });
      }
      out.compacted = n;
    }
    await client.query('COMMIT');
    committed = true;
    return out;
  } catch (err) {
    throw toDatabaseError(err, `compacting partition ${partitionId}`);
  } finally {
    // A client that failed mid-transaction or mid-COPY is discarded rather
    // than reused (even for a 40001 PostgreSQL raised: its transaction is
    // aborted, not ended).
    client.release(!rolledBack && !committed);
  }
}

/** Inserts a run's row and its slices (one COPY). */
async function writeRun(
  client: pg.PoolClient,
  partitionId: number,
  lo: number,
  hi: number,
  bits: number,
  n: number,
  level: number,
  slices: readonly Slice[],
): Promise<void> {
  const r = await client.query({ name: 'queen_compact_insert_run', text: INSERT_RUN_SQL, values: [partitionId, lo, hi, bits, n, level] });
  const runId = Number(r.rows[0].run_id);
  if (slices.length === 0) return;
  const w = new BinaryCopyWriter();
  for (const s of slices) {
    w.tuple([
      { int8: runId },
      { int4: s.bucket },
      { bytea: s.hashes },
      { int8Array: s.offs },
      s.createdUs === null ? { null: true } : { int8Array: s.createdUs },
    ]);
  }
  const body = w.finish();
  const stream = client.query(copyFrom(COPY_SLICES_IN_SQL));
  await new Promise<void>((resolve, reject) => {
    stream.on('error', reject);
    stream.on('finish', resolve);
    stream.end(body);
  });
}

/** Reads a binary COPY of `fields` columns, one value per tuple. */
async function copyOut<T>(client: pg.PoolClient, sql: string, fields: number, row: (f: (Buffer | null)[]) => T): Promise<T[]> {
  const out: T[] = [];
  const reader = new BinaryCopyReader(fields, (f) => out.push(row(f)));
  const stream = client.query(copyTo(sql));
  for await (const chunk of stream as AsyncIterable<Buffer>) reader.push(chunk);
  reader.finish();
  return out;
}
