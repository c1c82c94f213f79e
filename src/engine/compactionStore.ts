import type pg from 'pg';
import { toDatabaseError } from './sqlstate.js';

/** What one compaction call did (sql/functions/compaction.sql). */
export interface CompactionOutcome {
  /** Hashes written into a new run (0: the tail was under the minimum). */
  compacted: number;
  /** Hashes rewritten by a merge of runs (0: no tier had enough runs). */
  merged: number;
  /** Runs dropped because retention removed every row they were built from. */
  dropped: number;
}

const COMPACT_SQL = 'SELECT compacted, merged, dropped FROM queen.log_compact_v1($1::bigint, $2::integer, $3::integer)';

/**
 * One partition's compaction step, in its own (autocommit) transaction: a
 * new run of the rows above compacted_upto if at least `minTail` offsets are
 * there, at most one merge of `fanout` runs, and the drop of purged runs.
 * SQLSTATE 40001 (another compactor raised compacted_upto meanwhile) comes
 * back as a retriable error.
 */
export async function compactPartition(pool: pg.Pool, partitionId: number, minTail: number, fanout: number): Promise<CompactionOutcome> {
  try {
    const r = await pool.query({ name: 'queen_log_compact_v1', text: COMPACT_SQL, values: [partitionId, minTail, fanout] });
    const row = r.rows[0] as { compacted: string; merged: string; dropped: number };
    return { compacted: Number(row.compacted), merged: Number(row.merged), dropped: row.dropped };
  } catch (err) {
    throw toDatabaseError(err, `compacting partition ${partitionId}`);
  }
}
