import type pg from 'pg';

/**
 * The baseline a user would pick instead of a log with cursors: a job table
 * drained with SELECT ... FOR UPDATE SKIP LOCKED (the pattern of pg-boss and
 * graphile-worker). One row per message; a worker claims a batch (pending ->
 * active, with a lock timestamp so a dead worker's jobs could be reclaimed),
 * then completes it by deleting the rows (graphile-worker deletes finished
 * jobs; pg-boss moves them to an archive, which costs more).
 */
export const JOB_TABLE_SQL = `
CREATE TABLE bench_jobs (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue      text        NOT NULL,
    payload    bytea       NOT NULL,
    state      text        NOT NULL DEFAULT 'pending',
    locked_at  timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bench_jobs_fetch ON bench_jobs (queue, id) WHERE state = 'pending';`;

const CLAIM_SQL = `UPDATE bench_jobs j SET state = 'active', locked_at = now()
FROM (SELECT id FROM bench_jobs WHERE queue = $1 AND state = 'pending' ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) c
WHERE j.id = c.id
RETURNING j.id, j.payload`;
const COMPLETE_SQL = 'DELETE FROM bench_jobs WHERE id = ANY($1::bigint[])';

/** Inserts jobs (one multi-row INSERT per call). */
export async function enqueueJobs(pool: pg.Pool, queue: string, payloads: readonly Buffer[]): Promise<void> {
  await pool.query('INSERT INTO bench_jobs (queue, payload) SELECT $1, p FROM unnest($2::bytea[]) AS p', [queue, payloads]);
}

/** One worker: claim a batch, "process" it (decode JSON, as the engine's consumer does), complete it. Returns jobs done. */
export async function drainJobs(pool: pg.Pool, queue: string, batch: number, stopAt: () => boolean): Promise<number> {
  let done = 0;
  while (!stopAt()) {
    const r = await pool.query(CLAIM_SQL, [queue, batch]);
    if (r.rowCount === 0) break;
    for (const row of r.rows) JSON.parse((row.payload as Buffer).toString('utf8'));
    await pool.query(COMPLETE_SQL, [r.rows.map((x) => x.id)]);
    done += r.rowCount ?? 0;
  }
  return done;
}
