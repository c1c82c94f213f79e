import type pg from 'pg';
import { ValidationError } from '../errors.js';
import { getQueue } from './queueConfig.js';
import { checkQueueName } from './limits.js';
import { toDatabaseError } from './sqlstate.js';

export type QueueSummary = Awaited<ReturnType<typeof getQueue>>;

export const QUEUE_LIST_MAX = 1000;

/**
 * A page of queues by name (queue_list_v1): those after `after` (a name from
 * the previous page), at most `limit`. `next` is the name to pass as `after`
 * for the following page, present only when this page is full.
 */
export async function listQueues(pool: pg.Pool, after: unknown, limit: unknown): Promise<{ queues: QueueSummary[]; next?: string }> {
  const from = after === undefined || after === '' ? null : checkQueueName(after);
  const n = limit === undefined || limit === '' ? QUEUE_LIST_MAX : Number(limit);
  if (!Number.isInteger(n) || n < 1 || n > QUEUE_LIST_MAX)
    throw new ValidationError(`limit must be an integer from 1 to ${QUEUE_LIST_MAX}`, 'limit');
  let r: pg.QueryResult;
  try {
    r = await pool.query('SELECT name, options, created_at, updated_at, partitions FROM queen.queue_list_v1($1, $2)', [from, n]);
  } catch (err) {
    throw toDatabaseError(err, 'listing queues');
  }
  // Each entry is exactly what GET one queue answers (options from every
  // source, e.g. retention), so the list and the single view never disagree.
  const queues: QueueSummary[] = [];
  for (const row of r.rows) queues.push(await getQueue(pool, row.name as string));
  return queues.length === n ? { queues, next: queues[queues.length - 1]!.queue } : { queues };
}
