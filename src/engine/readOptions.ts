import type pg from 'pg';

/**
 * A queue's read options (sql/000026): leaseTime, the lease a pop takes when
 * the request names none (seconds), and retryLimit, the failed acks after
 * which a message is dead-lettered. Set through /configure like the others.
 */
export interface ReadOptions {
  leaseTime: number;
  retryLimit: number;
}

export const READ_OPTION_DEFAULTS: Readonly<ReadOptions> = { leaseTime: 300, retryLimit: 3 };

const CONFIGURE_SQL = 'SELECT lease_seconds, retry_limit FROM queen.queue_read_configure_v1($1, $2::jsonb, $3)';
const GET_SQL = 'SELECT lease_seconds, retry_limit FROM queen.queue_read_get_v1($1)';

const fromRow = (row: { lease_seconds: number; retry_limit: number }): ReadOptions => ({
  leaseTime: row.lease_seconds,
  retryLimit: row.retry_limit,
});

/** Sets the read options in the caller's transaction (after queue_configure_v1 made/locked the row). */
export async function configureReadOptions(
  client: pg.ClientBase,
  queue: string,
  options: Record<string, number | null>,
  reset: boolean,
): Promise<ReadOptions> {
  const r = await client.query(CONFIGURE_SQL, [queue, JSON.stringify(options), reset]);
  return fromRow(r.rows[0]);
}

/** The read options of a queue; undefined when it does not exist. */
export async function readOptionsOf(pool: pg.Pool, queue: string): Promise<ReadOptions | undefined> {
  const r = await pool.query(GET_SQL, [queue]);
  return r.rowCount === 0 ? undefined : fromRow(r.rows[0]);
}
