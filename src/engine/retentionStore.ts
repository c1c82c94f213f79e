import type pg from 'pg';
import { toDatabaseError } from './sqlstate.js';

/** What one retention step removed from one partition (queen.retention_step_v3). */
export interface RetentionStepResult {
  queue: string;
  segmentsRemoved: number;
  messagesRemoved: number;
  bytesRemoved: number;
  txnsRowsRemoved: number;
  logStart: number;
  txnsStart: number;
  /** A batch was full: step the partition again. */
  more: boolean;
  /** The offset every consumer group had completed, as the step used it (-1: nothing, or completedRetentionSeconds 0). */
  completedUpto: number;
}

/** Retention state of one queue, for GET /api/v1/resources/queues/:queue. */
export interface QueueRetentionState {
  retentionSeconds: number;
  completedRetentionSeconds: number;
  segmentsRemoved: number;
  messagesRemoved: number;
  bytesRemoved: number;
  txnsRowsRemoved: number;
  lastRemovalAt: string | null;
  purgeLagSeconds: number;
  oldestRetainedAgeSeconds: number;
}

const STEP_SQL = `SELECT queue_name, segments_removed, messages_removed, bytes_removed, txns_rows_removed, log_start, txns_start, more, completed_upto
  FROM queen.retention_step_v3($1::bigint, $2::integer, $3::bigint)`;
const CANDIDATES_SQL = 'SELECT partition_id, last_id FROM queen.retention_candidates_v2($1::bigint, $2::integer)';
const GET_SQL = `SELECT retention_seconds, completed_retention_seconds, segments_removed, messages_removed, bytes_removed,
  txns_rows_removed, last_removal_at, purge_lag_seconds, oldest_retained_age_seconds FROM queen.queue_retention_get_v2($1)`;
const CONFIGURE_SQL = 'SELECT retention_seconds, completed_retention_seconds FROM queen.queue_retention_configure_v1($1, $2::jsonb, $3)';

/** One page of partitions that need a retention step; `lastId` pages on (null: no partitions past `after`). */
export async function retentionCandidates(
  db: pg.ClientBase | pg.Pool,
  after: number,
  limit: number,
): Promise<{ ids: number[]; lastId: number | null }> {
  try {
    const r = await db.query({ name: 'queen_retention_candidates_v2', text: CANDIDATES_SQL, values: [after, limit] });
    const ids: number[] = [];
    let lastId: number | null = null;
    for (const row of r.rows) {
      if (row.partition_id !== null) ids.push(Number(row.partition_id));
      if (row.last_id !== null) lastId = Number(row.last_id);
    }
    return { ids, lastId };
  } catch (err) {
    throw toDatabaseError(err, 'listing retention candidates');
  }
}

/** One bounded step (its own transaction) on one partition; undefined when the partition is gone. */
export async function retentionStep(
  db: pg.ClientBase | pg.Pool,
  partitionId: number,
  maxRows: number,
  maxBytes: number,
): Promise<RetentionStepResult | undefined> {
  let r: pg.QueryResult;
  try {
    r = await db.query({ name: 'queen_retention_step_v3', text: STEP_SQL, values: [partitionId, maxRows, maxBytes] });
  } catch (err) {
    throw toDatabaseError(err, `retention step on partition ${partitionId}`);
  }
  const row = r.rows[0];
  if (!row) return undefined;
  return {
    queue: row.queue_name as string,
    segmentsRemoved: Number(row.segments_removed),
    messagesRemoved: Number(row.messages_removed),
    bytesRemoved: Number(row.bytes_removed),
    txnsRowsRemoved: Number(row.txns_rows_removed),
    logStart: Number(row.log_start),
    txnsStart: Number(row.txns_start),
    more: row.more as boolean,
    completedUpto: Number(row.completed_upto),
  };
}

export async function queueRetentionState(db: pg.ClientBase | pg.Pool, queue: string): Promise<QueueRetentionState | undefined> {
  let r: pg.QueryResult;
  try {
    r = await db.query(GET_SQL, [queue]);
  } catch (err) {
    throw toDatabaseError(err, "reading a queue's retention state");
  }
  const row = r.rows[0];
  if (!row) return undefined;
  return {
    retentionSeconds: row.retention_seconds,
    completedRetentionSeconds: row.completed_retention_seconds,
    segmentsRemoved: Number(row.segments_removed),
    messagesRemoved: Number(row.messages_removed),
    bytesRemoved: Number(row.bytes_removed),
    txnsRowsRemoved: Number(row.txns_rows_removed),
    lastRemovalAt: row.last_removal_at ? (row.last_removal_at as Date).toISOString() : null,
    purgeLagSeconds: Number(row.purge_lag_seconds),
    oldestRetainedAgeSeconds: Number(row.oldest_retained_age_seconds),
  };
}

/** Sets the retention options in the caller's transaction (after queue_configure_v1 made/locked the row). */
export async function configureRetention(
  client: pg.ClientBase,
  queue: string,
  options: Record<string, number | null>,
  reset: boolean,
): Promise<{ retentionSeconds: number; completedRetentionSeconds: number }> {
  const r = await client.query(CONFIGURE_SQL, [queue, JSON.stringify(options), reset]);
  return { retentionSeconds: r.rows[0].retention_seconds, completedRetentionSeconds: r.rows[0].completed_retention_seconds };
}

/** Every queue's purge lag and oldest retained age (seconds), for the leader's gauges. */
export async function retentionOverview(
  db: pg.ClientBase | pg.Pool,
): Promise<{ queue: string; purgeLagSeconds: number; oldestRetainedAgeSeconds: number }[]> {
  try {
    const r = await db.query({
      name: 'queen_retention_overview_v1',
      text: 'SELECT queue_name, purge_lag_seconds, oldest_retained_age_seconds FROM queen.retention_overview_v1()',
    });
    return r.rows.map((row) => ({
      queue: row.queue_name,
      purgeLagSeconds: Number(row.purge_lag_seconds),
      oldestRetainedAgeSeconds: Number(row.oldest_retained_age_seconds),
    }));
  } catch (err) {
    throw toDatabaseError(err, 'reading the retention overview');
  }
}

/** Lag of every consumer group of every queue (sql/000027), for the leader's gauges. */
export async function consumerLag(
  db: pg.ClientBase | pg.Pool,
): Promise<{ queue: string; group: string; lagMessages: number; partitionsBehind: number }[]> {
  try {
    const r = await db.query({
      name: 'queen_consumer_lag_v1',
      text: 'SELECT queue_name, consumer_group, lag_messages, partitions_behind FROM queen.consumer_lag_v1()',
    });
    return r.rows.map((row) => ({
      queue: row.queue_name,
      group: row.consumer_group,
      lagMessages: Number(row.lag_messages),
      partitionsBehind: Number(row.partitions_behind),
    }));
  } catch (err) {
    throw toDatabaseError(err, 'reading consumer lag');
  }
}

/**
 * The tables retention deletes from, vacuumed by the leader after passes that
 * removed rows (src/retention/logVacuum.ts, docs/retention.md "Reclaiming the
 * space"). SKIP_LOCKED: never wait behind autovacuum (or another broker's
 * vacuum) on the same table; TRUNCATE false: never take ACCESS EXCLUSIVE to
 * give trailing pages back, which would block every push and pop.
 * A constant statement, no values: VACUUM cannot run inside a function or a
 * transaction block, so it is sent as it is.
 */
const VACUUM_LOG_SQL = 'VACUUM (SKIP_LOCKED, TRUNCATE false) queen.log_segments, queen.log_txns';

/**
 * Whether this session may VACUUM both log tables: their owner (directly or
 * through an inherited role) or a superuser. VACUUM on a table it may not
 * vacuum only warns and does nothing, so the caller asks first.
 */
const CAN_VACUUM_SQL = `SELECT bool_and(pg_has_role(current_user, c.relowner, 'USAGE'))
    OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS ok
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = 'queen' AND c.relname IN ('log_segments', 'log_txns')`;

export async function vacuumLogTables(db: pg.ClientBase): Promise<void> {
  try {
    await db.query(VACUUM_LOG_SQL);
  } catch (err) {
    throw toDatabaseError(err, 'vacuuming the log tables');
  }
}

export async function canVacuumLogTables(db: pg.ClientBase): Promise<boolean> {
  try {
    const r = await db.query<{ ok: boolean | null }>(CAN_VACUUM_SQL);
    return r.rows[0]?.ok === true;
  } catch (err) {
    throw toDatabaseError(err, 'checking who may vacuum the log tables');
  }
}

/** Asks PostgreSQL to cancel the statement running on another session of this role (a vacuum being stopped). */
export async function cancelBackend(db: pg.ClientBase, pid: number): Promise<void> {
  try {
    await db.query('SELECT pg_cancel_backend($1::integer)', [pid]);
  } catch (err) {
    throw toDatabaseError(err, 'cancelling a backend');
  }
}
