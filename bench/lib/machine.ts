import { execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memBytes: number;
  loadavg: number[];
  platform: string;
  node: string;
  nodeFlags: string[];
  postgres: string | undefined;
  postgresSettings: Record<string, string>;
  kafka: string | undefined;
  /** The code measured: git commit and files under src/, sql/ and bench/ (the harness; not its results) that differ from it (uncommitted). */
  code: { commit: string | undefined; uncommitted: string[] };
}

/** Settings that move write throughput; recorded so runs on different clusters can be compared. */
const PG_SETTINGS = [
  'shared_buffers',
  'fsync',
  'synchronous_commit',
  'full_page_writes',
  'wal_level',
  'max_wal_size',
  'checkpoint_timeout',
  'work_mem',
  'max_connections',
];

export async function machineInfo(adminUrl: string, brokers: string[] | undefined): Promise<MachineInfo> {
  const cpus = os.cpus();
  let postgres: string | undefined;
  const postgresSettings: Record<string, string> = {};
  const c = new pg.Client({ connectionString: adminUrl });
  try {
    await c.connect();
    postgres = (await c.query('SELECT version()')).rows[0].version;
    const r = await c.query('SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)', [PG_SETTINGS]);
    for (const row of r.rows) postgresSettings[row.name] = row.unit ? `${row.setting} ${row.unit}` : row.setting;
  } catch {
    // Recorded as unknown; the suites will report the connection failure themselves.
  } finally {
    await c.end().catch(() => undefined);
  }
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    memBytes: os.totalmem(),
    loadavg: os.loadavg(),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    node: process.version,
    // The V8 flags this run had (the Makefile's QUEEN_NODE_OPTIONS): the young generation's size moves every rate.
    nodeFlags: [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].filter((f) => f.length > 0),
    postgres,
    postgresSettings,
    kafka: await kafkaVersion(brokers),
    code: codeVersion(),
  };
}

function codeVersion(): { commit: string | undefined; uncommitted: string[] } {
  try {
    // The repository holding bench/ (realpath: a run from a copied dist/ with a bench/ symlink still finds it).
    const cwd = dirname(realpathSync(REPO + 'bench'));
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const status = execFileSync('git', ['status', '--porcelain', '--', 'src', 'sql', 'bench', ':!bench/results'], {
      cwd,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return {
      commit,
      uncommitted: status
        .split('\n')
        .filter(Boolean)
        .map((l) => l.slice(3)),
    };
  } catch {
    return { commit: undefined, uncommitted: [] };
  }
}

/** The pinned version from deploy/local/kafka/pom.xml when the brokers are the local ones; else unknown. */
async function kafkaVersion(brokers: string[] | undefined): Promise<string | undefined> {
  if (!brokers || brokers.length === 0) return undefined;
  const local = brokers.every((b) => /^(127\.0\.0\.1|localhost|\[::1\]):\d+$/.test(b));
  if (!local) return 'unknown (remote brokers)';
  try {
    const pom = await readFile(REPO + 'deploy/local/kafka/pom.xml', 'utf8');
    const v = /<kafka\.version>([^<]+)<\/kafka\.version>/.exec(pom)?.[1];
    const override = process.env.QUEEN_KAFKA_VERSION;
    return override ? `${override} (QUEEN_KAFKA_VERSION; local)` : v ? `${v} (local, deploy/local/kafka/pom.xml)` : undefined;
  } catch {
    return undefined;
  }
}
