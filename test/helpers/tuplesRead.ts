import type pg from 'pg';

/**
 * What one statement read from `table`, counted by PostgreSQL: the
 * session's own counters (pg_stat_xact_*, which also hold its earlier,
 * unflushed work) read just before and just after it, in a transaction
 * that is rolled back (nothing it claims or changes stays). The rows the
 * statement returned come back too.
 */
export async function tuplesRead(
  sql: pg.Pool,
  table: string,
  statement: string,
  values: unknown[],
): Promise<{ rows: Record<string, unknown>[]; tuplesRead: number }> {
  const c = await sql.connect();
  const reads = async () =>
    Number(
      (
        await c.query(
          `SELECT coalesce(sum(seq_tup_read + idx_tup_fetch), 0) AS n FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`,
          [table],
        )
      ).rows[0].n,
    );
  try {
    await c.query('BEGIN');
    const before = await reads();
    const rows = (await c.query(statement, values)).rows as Record<string, unknown>[];
    return { rows, tuplesRead: (await reads()) - before };
  } finally {
    await c.query('ROLLBACK');
    c.release();
  }
}
