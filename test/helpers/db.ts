import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadFunctionFiles, loadMigrations, migrate } from '../../src/engine/migrate.js';

/**
 * Per-test-file databases, cloned from one migrated template.
 *
 * DATABASE_URL (set by scripts/with-deps.sh, or by the user) names a server
 * and a maintenance database with CREATEDB rights. The template is named after
 * the checksums of the migrations and of the function files, so a changed
 * migration set or function file gets a fresh template;
 * creating it is serialised across test processes by an advisory lock.
 */
export function adminUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: run tests through `make test` (it starts PostgreSQL)');
  return url;
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

async function templateName(): Promise<string> {
  const ms = await loadMigrations();
  const fs = await loadFunctionFiles();
  const { createHash } = await import('node:crypto');
  // Function files are applied only when their checksum changes, so they are
  // part of the name: an edited family file gets a fresh template.
  const sum = createHash('sha256')
    .update([...ms.map((m) => m.checksum), ...fs.map((f) => `${f.name}:${f.checksum}`)].join(','))
    .digest('hex')
    .slice(0, 12);
  return `queen_tpl_${sum}`;
}

async function ensureTemplate(admin: pg.Client): Promise<string> {
  const name = await templateName();
  await admin.query('SELECT pg_advisory_lock(4242)');
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) {
      // Identifiers cannot be bound as parameters; the name is ours (hex), quoted anyway.
      await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      const pool = new pg.Pool({ connectionString: withDatabase(adminUrl(), name), max: 1 });
      try {
        await migrate(pool);
      } finally {
        await pool.end();
      }
    }
  } finally {
    await admin.query('SELECT pg_advisory_unlock(4242)');
  }
  return name;
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(label: string, opts: { empty?: boolean } = {}): Promise<TestDatabase> {
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    const template = opts.empty ? 'template0' : await ensureTemplate(admin);
    const name = `t_${label
      .replace(/[^a-z0-9]/gi, '_')
      .toLowerCase()
      .slice(0, 30)}_${randomBytes(4).toString('hex')}`;
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(template)}`);
    return {
      name,
      url: withDatabase(adminUrl(), name),
      async drop() {
        const c = new pg.Client({ connectionString: adminUrl() });
        await c.connect();
        try {
          // pg-pool's end() resolves before its sockets have closed; a forced
          // drop would then kill a closing client whose error nobody hears.
          // So wait for the sessions to go, and force only what lingers.
          const deadline = Date.now() + 10_000;
          while (Date.now() < deadline) {
            const r = await c.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]);
            if (r.rows[0].n === 0) break;
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          await c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
        } finally {
          await c.end();
        }
      },
    };
  } finally {
    await admin.end();
  }
}
