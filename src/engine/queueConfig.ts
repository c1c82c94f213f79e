import type pg from 'pg';
import { NotFoundError, ValidationError } from '../errors.js';
import { checkQueueName } from './limits.js';
import { toDatabaseError } from './sqlstate.js';

/** The queue options the broker knows, with their types and limits. */
export interface QueueOptions {
  dedupWindowSeconds: number;
}

export const QUEUE_OPTION_DEFAULTS: Readonly<QueueOptions> = { dedupWindowSeconds: 3600 };

const MAX_WINDOW_SECONDS = 30 * 24 * 3600;

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
    if (key !== 'dedupWindowSeconds') throw new ValidationError(`unknown option "${key}"`, `options.${key}`);
    if (value === null) {
      out.dedupWindowSeconds = null;
      continue;
    }
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_WINDOW_SECONDS) {
      throw new ValidationError(`options.dedupWindowSeconds must be an integer from 0 to ${MAX_WINDOW_SECONDS}, or null for the default`, 'options.dedupWindowSeconds');
    }
    out.dedupWindowSeconds = value;
  }
  return out;
}

export function parseMode(mode: unknown): ConfigureMode {
  if (mode === undefined || mode === null || mode === 'merge') return 'merge';
  if (mode === 'replace') return 'replace';
  throw new ValidationError(`mode must be "merge" or "replace", got ${JSON.stringify(mode)}`, 'mode');
}

export async function configureQueue(pool: pg.Pool, queue: string, options: unknown, mode: unknown): Promise<{ created: boolean; options: QueueOptions }> {
  checkQueueName(queue);
  const opts = validateOptions(options);
  const replace = parseMode(mode) === 'replace';
  try {
    const r = await pool.query('SELECT created, options FROM queen.queue_configure_v1($1, $2::jsonb, $3)', [queue, JSON.stringify(opts), replace]);
    return { created: r.rows[0].created, options: r.rows[0].options };
  } catch (err) {
    throw toDatabaseError(err, 'configuring a queue');
  }
}

export async function getQueue(pool: pg.Pool, queue: string): Promise<{ queue: string; options: QueueOptions; createdAt: string; updatedAt: string; partitions: number }> {
  checkQueueName(queue);
  let r: pg.QueryResult;
  try {
    r = await pool.query('SELECT options, created_at, updated_at, partitions FROM queen.queue_get_v1($1)', [queue]);
  } catch (err) {
    throw toDatabaseError(err, 'reading a queue');
  }
  if (r.rowCount === 0) throw new NotFoundError(`queue "${queue}" does not exist`);
  const row = r.rows[0];
  return { queue, options: row.options, createdAt: row.created_at.toISOString(), updatedAt: row.updated_at.toISOString(), partitions: Number(row.partitions) };
}
