import type pg from 'pg';
import { NotFoundError, ValidationError } from '../errors.js';
import { checkQueueName } from './limits.js';
import { configureReadOptions, READ_OPTION_DEFAULTS, readOptionsOf } from './readOptions.js';
import { configureRetention, queueRetentionState, type QueueRetentionState } from './retentionStore.js';
import { toDatabaseError } from './sqlstate.js';

/** The queue options the broker knows, with their types and limits. */
export interface QueueOptions {
  dedupWindowSeconds: number;
  /** Segments older than this are removed (0 = keep). docs/retention.md */
  retentionSeconds: number;
  /** Raises the log_txns purge horizon; removal of completed data needs consumer cursors (docs/retention.md). */
  completedRetentionSeconds: number;
  /** The lease a pop takes when it names none, in seconds (sql/000026). */
  leaseTime: number;
  /** Failed acks of one message before it is dead-lettered. */
  retryLimit: number;
}

export const QUEUE_OPTION_DEFAULTS: Readonly<QueueOptions> = {
  dedupWindowSeconds: 3600,
  retentionSeconds: 0,
  completedRetentionSeconds: 0,
  ...READ_OPTION_DEFAULTS,
};

const MAX_WINDOW_SECONDS = 30 * 24 * 3600;
/** Retention options: up to ten years, in seconds (an int4 in SQL). */
const MAX_RETENTION_SECONDS = 10 * 366 * 24 * 3600;
const RETENTION_KEYS = new Set<string>(['retentionSeconds', 'completedRetentionSeconds']);
/** Read options: a lease of 1 s to 30 days; a retry limit up to a million (int4 columns). */
const READ_LIMITS: Readonly<Record<string, { min: number; max: number; what: string }>> = {
  leaseTime: { min: 1, max: 30 * 24 * 3600, what: 'seconds' },
  retryLimit: { min: 0, max: 1_000_000, what: 'failed acks' },
};

export type ConfigureMode = 'merge' | 'replace';

/**
 * Validates a /configure options object: known keys only, right types.
 * A value of null means "restore the default" and is passed through.
 */
export function validateOptions(options: unknown): Partial<Record<keyof QueueOptions, number | null>> {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ValidationError('options must be an object', 'options');
  }
  const out: Partial<Record<keyof QueueOptions, number | null>> = {};
  for (const [key, value] of Object.entries(options)) {
    if (RETENTION_KEYS.has(key)) {
      if (value !== null && (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_RETENTION_SECONDS)) {
        throw new ValidationError(
          `options.${key} must be an integer from 0 (keep) to ${MAX_RETENTION_SECONDS}, or null for the default`,
          `options.${key}`,
        );
      }
      out[key as keyof QueueOptions] = value as number | null;
      continue;
    }
    const read = READ_LIMITS[key];
    if (read) {
      if (value !== null && (typeof value !== 'number' || !Number.isInteger(value) || value < read.min || value > read.max)) {
        throw new ValidationError(
          `options.${key} must be an integer from ${read.min} to ${read.max} (${read.what}), or null for the default`,
          `options.${key}`,
        );
      }
      out[key as keyof QueueOptions] = value as number | null;
      continue;
    }
    if (key !== 'dedupWindowSeconds') throw new ValidationError(`unknown option "${key}"`, `options.${key}`);
    if (value === null) {
      out.dedupWindowSeconds = null;
      continue;
    }
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_WINDOW_SECONDS) {
      throw new ValidationError(
        `options.dedupWindowSeconds must be an integer from 0 to ${MAX_WINDOW_SECONDS}, or null for the default`,
        'options.dedupWindowSeconds',
      );
    }
    out.dedupWindowSeconds = value;
  }
  return out;
}

/** Omitted means merge; anything else but the two names (null included) is a 400, as documented. */
export function parseMode(mode: unknown): ConfigureMode {
  if (mode === undefined || mode === 'merge') return 'merge';
  if (mode === 'replace') return 'replace';
  throw new ValidationError(`mode must be "merge" or "replace", got ${describe(mode)}`, 'mode');
}

/** A short, safe rendering of a client's value for an error message (never serialises an arbitrary structure). */
function describe(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return String(v);
  return Array.isArray(v) ? 'an array' : `a ${typeof v}`;
}

export async function configureQueue(
  pool: pg.Pool,
  queue: string,
  options: unknown,
  mode: unknown,
): Promise<{ created: boolean; options: QueueOptions }> {
  checkQueueName(queue);
  const opts = validateOptions(options);
  const replace = parseMode(mode) === 'replace';
  // Both option sets in one transaction: the retention function runs on the
  // row queue_configure_v1 created or locked.
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    const r = await client.query('SELECT created, options FROM queen.queue_configure_v1($1, $2::jsonb, $3)', [
      queue,
      JSON.stringify(opts),
      replace,
    ]);
    const created: boolean = r.rows[0].created;
    const retention = await configureRetention(client, queue, opts, replace || created);
    const read = await configureReadOptions(client, queue, opts, replace || created);
    await client.query('COMMIT');
    return { created, options: { ...r.rows[0].options, ...retention, ...read } };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => (broken = true));
    throw toDatabaseError(err, 'configuring a queue');
  } finally {
    client.release(broken);
  }
}

export async function getQueue(
  pool: pg.Pool,
  queue: string,
): Promise<{
  queue: string;
  options: QueueOptions;
  createdAt: string;
  updatedAt: string;
  partitions: number;
  retention?: Omit<QueueRetentionState, 'retentionSeconds' | 'completedRetentionSeconds'>;
}> {
  checkQueueName(queue);
  let r: pg.QueryResult;
  try {
    r = await pool.query('SELECT options, created_at, updated_at, partitions FROM queen.queue_get_v1($1)', [queue]);
  } catch (err) {
    throw toDatabaseError(err, 'reading a queue');
  }
  if (r.rowCount === 0) throw new NotFoundError(`queue "${queue}" does not exist`);
  const row = r.rows[0];
  const base = {
    queue,
    options: row.options,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    partitions: Number(row.partitions),
  };
  let read;
  try {
    read = await readOptionsOf(pool, queue);
  } catch (err) {
    throw toDatabaseError(err, 'reading a queue');
  }
  if (read) base.options = { ...base.options, ...read };
  const ret = await queueRetentionState(pool, queue);
  if (!ret) return base;
  const { retentionSeconds, completedRetentionSeconds, ...state } = ret;
  return { ...base, options: { ...base.options, retentionSeconds, completedRetentionSeconds }, retention: state };
}
