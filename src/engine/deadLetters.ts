import type pg from 'pg';
import { toDatabaseError } from './sqlstate.js';

/** A dead letter as stored (queen.log_dead_letters), with its queue and partition names. */
export interface DeadLetter {
  id: number;
  queue: string;
  partition: string;
  partitionId: number;
  consumerGroup: string;
  offset: number;
  messageId: string | null;
  transactionId: string | null;
  traceContext: string | null;
  payload: Buffer | null;
  error: string | null;
  attempts: number;
  createdAt: Date;
  requeuedAt: Date | null;
}

const LIST_SQL = `SELECT d.id, q.name AS queue, lp.name AS partition, d.partition_id, d.consumer_group, d.msg_offset, d.message_id::text AS message_id,
       d.transaction_id, d.trace_context, d.payload, d.error, d.attempts, d.created_at, d.requeued_at
FROM queen.log_dead_letters d
JOIN queen.log_partitions lp ON lp.id = d.partition_id
JOIN queen.queues q ON q.id = lp.queue_id
WHERE q.name = $1 AND ($2::text IS NULL OR d.consumer_group = $2) AND d.id > $3
ORDER BY d.id
LIMIT $4`;

// Claims the row for requeueing (the row lock makes a second requeue wait, then see requeued_at set).
const CLAIM_SQL = `UPDATE queen.log_dead_letters d SET requeued_at = clock_timestamp()
FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
WHERE d.id = $1 AND lp.id = d.partition_id AND d.requeued_at IS NULL
RETURNING d.id, q.name AS queue, lp.name AS partition, d.partition_id, d.consumer_group, d.msg_offset, d.message_id::text AS message_id,
          d.transaction_id, d.trace_context, d.payload, d.error, d.attempts, d.created_at, d.requeued_at`;

export async function listDeadLetters(
  pool: pg.Pool,
  queue: string,
  group: string | undefined,
  after: number,
  limit: number,
): Promise<DeadLetter[]> {
  try {
    const r = await pool.query(LIST_SQL, [queue, group ?? null, after, limit]);
    return r.rows.map(toDeadLetter);
  } catch (err) {
    throw toDatabaseError(err, 'listing dead letters');
  }
}

/** Marks a dead letter requeued on `client` (inside the caller's transaction); null when it does not exist or was requeued already. */
export async function claimDeadLetter(client: pg.ClientBase, id: number): Promise<DeadLetter | null> {
  try {
    const r = await client.query(CLAIM_SQL, [id]);
    return r.rowCount === 0 ? null : toDeadLetter(r.rows[0]);
  } catch (err) {
    throw toDatabaseError(err, 'requeueing a dead letter');
  }
}

export async function deadLetterExists(pool: pg.Pool, id: number): Promise<boolean> {
  const r = await pool.query('SELECT 1 FROM queen.log_dead_letters WHERE id = $1', [id]);
  return (r.rowCount ?? 0) > 0;
}

function toDeadLetter(r: pg.QueryResultRow): DeadLetter {
  return {
    id: r.id,
    queue: r.queue,
    partition: r.partition,
    partitionId: r.partition_id,
    consumerGroup: r.consumer_group,
    offset: r.msg_offset,
    messageId: r.message_id,
    transactionId: r.transaction_id,
    traceContext: r.trace_context,
    payload: r.payload,
    error: r.error,
    attempts: r.attempts,
    createdAt: r.created_at,
    requeuedAt: r.requeued_at,
  };
}
