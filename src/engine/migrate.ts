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

/** One family file of sql/functions/ (docs/sql-layout.md): applied again whenever its checksum changes. */
export interface FunctionFile {
  /** The file name without `.sql` (push, pop, ...). */
  name: string;
  sql: string;
  checksum: string;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The function files live in `functions/` under the migrations' directory. */
export const functionsDirOf = (dir: string) => `${dir.replace(/\/?$/, '/')}functions/`;

export async function loadMigrations(dir = SQL_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{6}_[a-z0-9_]+\.sql$/.test(f)).sort();
  const out: Migration[] = [];
  for (const f of files) {
    const sql = await readFile(dir + f, 'utf8');
    out.push({ version: Number(f.slice(0, 6)), name: f.slice(7, -4), sql, checksum: sha256(sql) });
  }
  out.forEach((m, i) => {
    if (i > 0 && m.version === out[i - 1]!.version) throw new QueenError(`two migrations share version ${m.version}`);
  });
  return out;
}

/** The function files in name order (the order they are applied in). */
export async function loadFunctionFiles(dir = SQL_DIR): Promise<FunctionFile[]> {
  const fdir = functionsDirOf(dir);
  const files = (await readdir(fdir)).filter((f) => /^[a-z0-9_]+\.sql$/.test(f)).sort();
  const out: FunctionFile[] = [];
  for (const f of files) {
    const sql = await readFile(fdir + f, 'utf8');
    out.push({ name: f.slice(0, -4), sql, checksum: sha256(sql) });
  }
  return out;
}

/**
 * Brings the database to the shipped SQL, in two steps under one session
 * advisory lock (runners serialise on it, so two at once do not collide and
 * a second run is a no-op):
 *
 * 1. Every numbered migration not yet recorded, in version order, each in its
 *    own transaction together with its record. A recorded migration whose file
 *    changed is refused: shipped migrations are never edited.
 * 2. Every function file whose checksum differs from the one recorded in
 *    queen.function_files (created by migration 000091), in name order, each
 *    in its own transaction together with its new record. Files come after the
 *    migrations so that a function always finds the tables and columns it
 *    reads, and so that a migration that drops a superseded version runs
 *    before the files that no longer hold it. A file is idempotent
 *    (CREATE OR REPLACE), so one applied twice, or half a fleet's worth of
 *    times, leaves the same definitions (docs/sql-layout.md).
 *
 * A broker of an older release that starts (or restarts) during a rolling
 * upgrade finds migrations recorded that it does not ship: the database is a
 * newer release's. It applies no function file then. The newer files hold
 * every version it calls (the rolling-upgrade predecessor rule), and its own
 * older files would put back versions a newer migration dropped, and re-record
 * checksums the next new broker would apply again.
 */
export interface MigrateResult {
  /** The numbered migrations this run applied. */
  applied: number[];
  /** The function files this run applied. */
  functions: string[];
  /** Set when the database holds a migration newer than this release ships (then no function file was applied). */
  newerSchema?: number;
}

export async function migrate(pool: pg.Pool, dir = SQL_DIR): Promise<MigrateResult> {
  const migrations = await loadMigrations(dir);
  const functionFiles = await loadFunctionFiles(dir);
  const client = await pool.connect();
  const applied: number[] = [];
  const functions: string[] = [];
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
        await inTransaction(client, `migration ${m.version}_${m.name}`, async () => {
          await client.query(m.sql);
          await client.query('INSERT INTO queen.migrations (version, name, checksum) VALUES ($1, $2, $3)', [m.version, m.name, m.checksum]);
        });
        applied.push(m.version);
      }

      const shipped = migrations.at(-1)?.version ?? 0;
      const newest = Math.max(0, ...done.keys());
      if (newest > shipped) return { applied, functions, newerSchema: newest };

      const recordedFiles = new Map<string, string>();
      for (const r of (await client.query('SELECT name, checksum FROM queen.function_files')).rows) {
        recordedFiles.set(r.name as string, r.checksum as string);
      }
      for (const f of functionFiles) {
        if (recordedFiles.get(f.name) === f.checksum) continue;
        await inTransaction(client, `function file ${f.name}.sql`, async () => {
          await client.query(f.sql);
          await client.query(
            `INSERT INTO queen.function_files (name, checksum) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()`,
            [f.name, f.checksum],
          );
        });
        functions.push(f.name);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    client.release();
  }
  return { applied, functions };
}

async function inTransaction(client: pg.PoolClient, what: string, work: () => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await work();
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw toDatabaseError(err, what);
  }
}
