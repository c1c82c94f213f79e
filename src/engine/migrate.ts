import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { QueenError } from '../errors.js';
import { toDatabaseError } from './sqlstate.js';

/** The shipped migrations: <repo>/sql/NNNNNN_name.sql (this file runs from dist/src/engine). */
export const SQL_DIR = fileURLToPath(new URL('../../../sql/', import.meta.url));

/** Advisory lock key shared by every runner ("queen-mg" as a 64-bit integer). */
const MIGRATION_LOCK_KEY = '8243311830427887463';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

export async function loadMigrations(dir = SQL_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{6}_[a-z0-9_]+\.sql$/.test(f)).sort();
  const out: Migration[] = [];
  for (const f of files) {
    const sql = await readFile(dir + f, 'utf8');
    out.push({
      version: Number(f.slice(0, 6)),
      name: f.slice(7, -4),
      sql,
      checksum: createHash('sha256').update(sql).digest('hex'),
    });
  }
  out.forEach((m, i) => {
    if (i > 0 && m.version === out[i - 1]!.version) throw new QueenError(`two migrations share version ${m.version}`);
  });
  return out;
}

/**
 * Applies every migration not yet recorded, in version order, each in its own
 * transaction together with its record. Runners serialise on one session
 * advisory lock, so two at once do not collide; a second run is a no-op.
 * A recorded migration whose file changed is refused: shipped SQL is never
 * edited (a changed function is a new migration with a new version suffix).
 */
export async function migrate(pool: pg.Pool, dir = SQL_DIR): Promise<{ applied: number[] }> {
  const migrations = await loadMigrations(dir);
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query('CREATE SCHEMA IF NOT EXISTS queen');
      await client.query(`CREATE TABLE IF NOT EXISTS queen.migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        checksum text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now())`);
      const done = new Map<number, string>();
      for (const r of (await client.query('SELECT version, checksum FROM queen.migrations')).rows) {
        done.set(r.version as number, r.checksum as string);
      }
      for (const m of migrations) {
        const recorded = done.get(m.version);
        if (recorded !== undefined) {
          if (recorded !== m.checksum) {
            throw new QueenError(`migration ${m.version}_${m.name} was edited after it shipped; add a new migration instead`);
          }
          continue;
        }
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO queen.migrations (version, name, checksum) VALUES ($1, $2, $3)', [m.version, m.name, m.checksum]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw toDatabaseError(err, `migration ${m.version}_${m.name}`);
        }
        applied.push(m.version);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    client.release();
  }
  return { applied };
}
