import type pg from 'pg';
import { toDatabaseError } from './sqlstate.js';

/** A partition written within its dedup window: a candidate to warm the cache with at start. */
export interface RecentPartition {
  partitionId: number;
  windowSeconds: number;
  /**
   * Offsets it holds above its purge watermark: an upper bound of its
   * in-window hashes (exact when every stored row is inside the window),
   * read from log_partitions alone.
   */
  storedOffsets: number;
}

// The most recently written first. Only partitions written inside their
// window have anything a push could be a duplicate of.
const RECENT_SQL = `SELECT lp.id, q.dedup_window_seconds, lp.last_offset - lp.txns_start + 1 AS stored
  FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
  WHERE q.dedup_window_seconds > 0
    AND lp.last_offset >= lp.txns_start
    AND lp.last_write_at >= now() - make_interval(secs => q.dedup_window_seconds)
  ORDER BY lp.last_write_at DESC, lp.id
  LIMIT $1`;

/**
 * Up to `limit` partitions written within their dedup window, the most
 * recently written first (src/fusion/cachePrewarm.ts warms the cache with
 * them). Advisory: which partitions are warmed never changes a verdict.
 */
export async function recentPartitions(pool: pg.Pool, limit: number): Promise<RecentPartition[]> {
  try {
    const r = await pool.query<{ id: string; dedup_window_seconds: number; stored: string }>({
      name: 'queen_recent_partitions',
      text: RECENT_SQL,
      values: [limit],
    });
    return r.rows.map((row) => ({
      partitionId: Number(row.id),
      windowSeconds: row.dedup_window_seconds,
      storedOffsets: Number(row.stored),
    }));
  } catch (err) {
    throw toDatabaseError(err, 'reading the recently written partitions');
  }
}
