import type pg from 'pg';
import { ValidationError } from '../errors.js';
import type { QueueOptions } from './queueConfig.js';
import { checkQueueName } from './limits.js';
import { toDatabaseError } from './sqlstate.js';

export interface QueueSummary {
  queue: string;
  options: QueueOptions;
  createdAt: string;
  updatedAt: string;
  partitions: number;
}

export const QUEUE_LIST_MAX = 1000;

/**
 * A page of queues by name (queue_list_v1): those after `after` (a name from
 * the previous page), at most `limit`. `next` is the name to pass as `after`
 * for the following page, present only when this page is full.
 */
export async function listQueues(pool: pg.Pool, after: unknown, limit: unknown): Promise<{ queues: QueueSummary[]; next?: string }> {
  const from = after === undefined || after === '' ? null : checkQueueName(after);
  const n = limit === undefined || limit === '' ? QUEUE_LIST_MAX : Number(limit);
  if (!Number.isInteger(n) || n < 1 || n > QUEUE_LIST_MAX) throw new ValidationError(`limit must be an integer from 1 to ${QUEUE_LIST_MAX}`, 'limit');
  let r: pg.QueryResult;
  try {
    r = await pool.query('SELECT name, options, created_at, updated_at, partitions FROM queen.queue_list_v1($1, $2)', [from, n]);
  } catch (err) {
    throw toDatabaseError(err, 'listing queues');
  }
  const queues = r.rows.map((row) => ({
    queue: row.name as string,
    options: row.options as QueueOptions,
    createdAt: (row.created_at as Date).toISOString(),
    updatedAt: (row.updated_at as Date).toISOString(),
    partitions: Number(row.partitions),
  }));
  return queues.length === n ? { queues, next: queues[queues.length - 1]!.queue } : { queues };
}
