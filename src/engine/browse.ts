import type pg from 'pg';
import { NotFoundError } from '../errors.js';
import { decodeOrigin, unpackSegment } from './frames.js';
import { checkPartitionName, checkQueueName } from './limits.js';
import type { PoppedMessage } from './pop.js';
import { toDatabaseError } from './sqlstate.js';
import { hashTransactionId } from '../util/txnHash.js';
import { uuidToString } from '../util/uuidv7.js';

/**
 * Reading the log without a cursor, for operators: a span of a partition, or
 * a message by transactionId. Nothing here leases or settles anything.
 */

export interface PartitionRow {
  partitionId: number;
  queue: string;
  partition: string;
  logStart: number;
  lastOffset: number;
}

const PARTITION_SQL = `SELECT lp.id, lp.log_start, lp.last_offset FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
WHERE q.name = $1 AND lp.name = $2`;
const PARTITION_BY_ID_SQL = `SELECT lp.id, lp.name, q.name AS queue, lp.log_start, lp.last_offset FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
WHERE lp.id = $1`;
// From the segment holding $2 (a bounded range of the primary key).
const SPAN_SQL = `SELECT base_offset, end_offset, created_at, blob FROM queen.log_segments
WHERE partition_id = $1
  AND base_offset >= coalesce((SELECT max(x.base_offset) FROM queen.log_segments x WHERE x.partition_id = $1 AND x.base_offset <= $2), $2)
  AND base_offset <= $3
ORDER BY base_offset`;
// Every occurrence of a hash in the partition (an operator's look-up: it reads the partition's log_txns).
const BY_HASH_SQL = `SELECT t.base_offset + th.idx AS off FROM queen.log_txns t CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
WHERE t.partition_id = $1 AND th.h = $2 ORDER BY 1`;

export async function findPartition(pool: pg.Pool, queue: string, partition: string | undefined): Promise<PartitionRow> {
  const q = checkQueueName(queue);
  const p = checkPartitionName(partition);
  const r = await query(pool, PARTITION_SQL, [q, p], 'finding a partition');
  if (r.rowCount === 0) throw new NotFoundError(`queue "${q}" has no partition "${p}"`);
  const row = r.rows[0];
  return { partitionId: row.id, queue: q, partition: p, logStart: row.log_start, lastOffset: row.last_offset };
}

export async function partitionById(pool: pg.Pool, partitionId: number): Promise<PartitionRow> {
  const r = await query(pool, PARTITION_BY_ID_SQL, [partitionId], 'finding a partition');
  if (r.rowCount === 0) throw new NotFoundError(`no partition with id ${partitionId}`);
  const row = r.rows[0];
  return { partitionId: row.id, queue: row.queue, partition: row.name, logStart: row.log_start, lastOffset: row.last_offset };
}

/** Messages of a partition from offset `from` (clamped to log_start), at most `limit`. */
export async function readSpan(pool: pg.Pool, p: PartitionRow, from: number, limit: number): Promise<PoppedMessage[]> {
  const lo = Math.max(from, p.logStart);
  const hi = Math.min(lo + limit - 1, p.lastOffset);
  if (hi < lo) return [];
  const r = await query(pool, SPAN_SQL, [p.partitionId, lo, hi], 'reading the log');
  const out: PoppedMessage[] = [];
  for (const row of r.rows) {
    const frames = unpackSegment(row.blob as Buffer);
    const base = row.base_offset as number;
    for (let off = Math.max(lo, base); off <= Math.min(hi, row.end_offset as number); off++) {
      const f = frames[off - base]!;
      out.push({
        id: uuidToString(f.id),
        transactionId: f.transactionId,
        partition: p.partition,
        partitionId: p.partitionId,
        offset: off,
        createdAt: row.created_at,
        payload: f.payload,
        traceContext: f.traceContext,
        kafka: f.origin && decodeOrigin(f.origin),
      });
    }
  }
  return out;
}

/** Every stored message of the partition with this transactionId, oldest first (several when dedup was off). */
export async function readByTransactionId(pool: pg.Pool, p: PartitionRow, transactionId: string): Promise<PoppedMessage[]> {
  const r = await query(pool, BY_HASH_SQL, [p.partitionId, hashTransactionId(transactionId)], 'finding a transactionId');
  const out: PoppedMessage[] = [];
  for (const row of r.rows) {
    const [m] = await readSpan(pool, p, row.off as number, 1);
    // The hash matched; the stored id must too (a 128-bit collision is possible in principle).
    if (m && m.offset === row.off && m.transactionId === transactionId) out.push(m);
  }
  return out;
}

async function query(pool: pg.Pool, text: string, values: unknown[], what: string): Promise<pg.QueryResult> {
  try {
    return await pool.query(text, values);
  } catch (err) {
    throw toDatabaseError(err, what);
  }
}
