import type pg from 'pg';

/**
 * Removes segments the way a retention step does (retention_step_v3,
 * 000025): a prefix of the partition's segments, every one with
 * base_offset <= cut, and log_start moved past it, in one transaction under
 * the partition row lock. log_push_v7 and later rely on that shape (a row's segment
 * exists exactly when its base_offset >= log_start), so tests that need a
 * removed original remove it this way rather than deleting a segment from
 * the middle, which no code path does. Returns the segments removed.
 */
export async function retainPast(pool: pg.Pool, partitionId: number | string, cut: number | string): Promise<number> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('SELECT 1 FROM queen.log_partitions WHERE id = $1 FOR UPDATE', [partitionId]);
    const gone = await c.query('DELETE FROM queen.log_segments WHERE partition_id = $1 AND base_offset <= $2', [partitionId, cut]);
    await c.query('UPDATE queen.log_partitions SET log_start = GREATEST(log_start, $2::bigint + 1) WHERE id = $1', [partitionId, cut]);
    await c.query('COMMIT');
    return gone.rowCount ?? 0;
  } catch (err) {
    await c.query('ROLLBACK');
    throw err;
  } finally {
    c.release();
  }
}

/** The id of a queue's partition. */
export async function partitionIdOf(pool: pg.Pool, queue: string, partition: string): Promise<string> {
  const r = await pool.query(
    `SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 AND lp.name = $2`,
    [queue, partition],
  );
  if (r.rows.length !== 1) throw new Error(`no partition ${queue}/${partition}`);
  return r.rows[0].id as string;
}
