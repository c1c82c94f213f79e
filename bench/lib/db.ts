import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../src/engine/migrate.js';
import { onPoolConnect } from '../../src/engine/session.js';

/**
 * One private database per benchmark: CREATE DATABASE bench_<label>_<rand> on
 * the server DATABASE_URL names, the shipped migrations applied, dropped at
 * the end. Other databases on the server (tests run concurrently) are never
 * touched. Databases still open when the process is interrupted are dropped
 * by dropAllBenchDatabases() (bench/run.ts calls it on SIGINT/SIGTERM).
 */

export interface BenchDatabase {
  name: string;
  url: string;
  /** Opens a pool on the benchmark database (ended by drop() if still open). */
  pool(max: number, application?: string): pg.Pool;
  drop(): Promise<void>;
}

const open = new Set<BenchDatabase>();

export function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/**
 * `template`: clone that (bench) database instead of starting empty
 * (STRATEGY FILE_COPY: a file copy, much faster than re-loading millions of
 * rows; the template must have no open connections). A clone is not migrated
 * again.
 */
export async function createBenchDatabase(
  adminUrl: string,
  label: string,
  opts: { migrate?: boolean; template?: string } = {},
): Promise<BenchDatabase> {
  const name = `bench_${label
    .replace(/[^a-z0-9]/gi, '_')
    .toLowerCase()
    .slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  const url = withDatabase(adminUrl, name);
  const pools = new Set<pg.Pool>();
  let dropped = false;
  const db: BenchDatabase = {
    name,
    url,
    pool(max, application = 'queen-bench') {
      // idleTimeoutMillis 0: connections (and their plan caches) live for the whole
      // benchmark instead of being re-opened after every 10 s pause (a load, a step).
      // onConnect: the service's session settings (no JIT) for the engine under
      // test and for the baselines alike: none of their statements gains from compiling.
      const p = new pg.Pool({ connectionString: url, max, application_name: application, idleTimeoutMillis: 0, onConnect: onPoolConnect });
      p.on('error', () => undefined);
      pools.add(p);
      const end = p.end.bind(p);
      p.end = async () => {
        pools.delete(p);
        if (!p.ended && !p.ending) await end();
      };
      return p;
    },
    async drop() {
      if (dropped) return;
      dropped = true;
      open.delete(db);
      for (const p of [...pools]) await p.end().catch(() => undefined);
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
  // Registered before it exists, so an interrupt during CREATE DATABASE still drops it.
  open.add(db);
  const admin = new pg.Client({ connectionString: adminUrl });
  try {
    await admin.connect();
    if (opts.template)
      await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(opts.template)} STRATEGY FILE_COPY`);
    else await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE template0`);
  } catch (err) {
    open.delete(db);
    throw err;
  } finally {
    await admin.end().catch(() => undefined);
  }
  if (opts.migrate !== false && !opts.template) {
    const p = db.pool(1, 'queen-bench-migrate');
    try {
      await migrate(p);
    } catch (err) {
      await db.drop().catch(() => undefined);
      throw err;
    } finally {
      await p.end();
    }
  }
  return db;
}

export function benchDatabaseNames(): string[] {
  return [...open].map((d) => d.name);
}

export async function dropAllBenchDatabases(): Promise<void> {
  for (const db of [...open]) await db.drop().catch(() => undefined);
}

/**
 * CHECKPOINT after a bulk load, so the load's dirty pages are not written
 * back in the middle of a measurement. Needs superuser or pg_checkpoint;
 * skipped (and reported) without it.
 */
export async function checkpoint(pool: pg.Pool): Promise<boolean> {
  try {
    await pool.query('CHECKPOINT');
    return true;
  } catch {
    return false;
  }
}
