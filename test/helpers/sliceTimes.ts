import type pg from 'pg';

/**
 * Tests stand in for elapsed time by moving log_txns.created_at back. A
 * run's slices hold a copy of each pair's time (created_us, sql/000094),
 * which in production never diverges from its row because rows are never
 * rewritten; a test that rewrites rows must move the copies too, or it
 * tests a state no code path makes. Every timed pair of the given
 * partitions' runs takes its row's created_at again; a pair whose row is
 * gone keeps its time, and a slice without times stays without.
 */
export async function syncSliceTimes(sql: pg.Pool, partitionIds: readonly (number | string)[]): Promise<void> {
  await sql.query(
    `UPDATE queen.log_hash_slices s SET created_us = x.created_us
     FROM (
       SELECT s2.run_id, s2.bucket,
              array_agg(coalesce((extract(epoch FROM t.created_at) * 1000000)::bigint, s2.created_us[k]) ORDER BY k) AS created_us
       FROM queen.log_hash_slices s2
       JOIN queen.log_hash_runs r ON r.run_id = s2.run_id
       CROSS JOIN LATERAL generate_subscripts(s2.offs, 1) AS k
       LEFT JOIN queen.log_txns t
         ON t.partition_id = r.partition_id AND t.base_offset <= s2.offs[k] AND t.end_offset >= s2.offs[k]
       WHERE r.partition_id = ANY ($1::bigint[]) AND s2.created_us IS NOT NULL
       GROUP BY s2.run_id, s2.bucket
     ) x
     WHERE s.run_id = x.run_id AND s.bucket = x.bucket`,
    [partitionIds.map(String)],
  );
}
