import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { frameOf, packSegment } from '../../src/engine/frames.js';
import { functionsDirOf, loadFunctionFiles, loadMigrations, migrate, SQL_DIR } from '../../src/engine/migrate.js';
import { HASH_BYTES, hashTransactionId } from '../../src/util/txnHash.js';
import { uuidToString, uuidv7Bytes } from '../../src/util/uuidv7.js';
import { createTestDatabase } from '../helpers/db.js';
import { parseFunctionFiles } from '../helpers/sqlFunctions.js';

// docs/sql-layout.md: tables in numbered migrations, functions in
// sql/functions/<family>.sql applied when their checksum changes, and the
// rolling upgrade from the release before that layout.

/**
 * The last numbered migration of the release before the function files
 * (main at a17673d): what a deployed broker of that release has applied, with
 * no function files.
 */
const MAIN_LAST_MIGRATION = 90;

/** What that release's runner did: each migration in its own transaction, recorded in queen.migrations. */
async function migrateLikeMain(pool: pg.Pool): Promise<void> {
  await pool.query('CREATE SCHEMA IF NOT EXISTS queen');
  await pool.query(`CREATE TABLE IF NOT EXISTS queen.migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())`);
  const c = await pool.connect();
  try {
    for (const m of await loadMigrations()) {
      if (m.version > MAIN_LAST_MIGRATION) break;
      await c.query('BEGIN');
      await c.query(m.sql);
      await c.query('INSERT INTO queen.migrations (version, name, checksum) VALUES ($1, $2, $3)', [m.version, m.name, m.checksum]);
      await c.query('COMMIT');
    }
  } finally {
    c.release();
  }
}

interface FunctionRow {
  name: string;
  signature: string;
  def: string;
  src: string;
}

async function functionsOf(pool: pg.Pool): Promise<FunctionRow[]> {
  const r = await pool.query(
    `SELECT p.proname AS name, p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS signature,
            pg_get_functiondef(p.oid) AS def, p.prosrc AS src
     FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'queen'
     ORDER BY 2`,
  );
  return r.rows as FunctionRow[];
}

async function recordedFiles(pool: pg.Pool): Promise<Record<string, string>> {
  const r = await pool.query('SELECT name, checksum FROM queen.function_files ORDER BY name');
  return Object.fromEntries(r.rows.map((row) => [row.name, row.checksum]));
}

/** The database holds exactly the functions the files define, each with the file's body. */
async function assertHoldsTheFiles(t: ExecutionContext, pool: pg.Pool, label: string): Promise<void> {
  const fileFns = (await parseFunctionFiles()).flatMap((f) => f.functions).sort((a, b) => a.name.localeCompare(b.name));
  const db = await functionsOf(pool);
  t.deepEqual(
    db.map((f) => f.name).sort(),
    fileFns.map((f) => f.name),
    `${label}: every function in the queen schema is one a file defines, and every one a file defines exists`,
  );
  for (const f of fileFns) t.is(db.find((d) => d.name === f.name)?.src, f.body, `${label}: ${f.name} is ${f.file}'s`);
  const files = await loadFunctionFiles();
  t.deepEqual(
    await recordedFiles(pool),
    Object.fromEntries(files.map((f) => [f.name, f.checksum])),
    `${label}: every file recorded as applied`,
  );
}

test('a database at the previous release schema, upgraded by the migrator, holds byte for byte the functions of a fresh one', async (t) => {
  const old = await createTestDatabase('sql_upgrade', { empty: true });
  const fresh = await createTestDatabase('sql_fresh');
  const oldPool = new pg.Pool({ connectionString: old.url, max: 1 });
  const freshPool = new pg.Pool({ connectionString: fresh.url, max: 1 });
  try {
    await migrateLikeMain(oldPool);
    const before = (await functionsOf(oldPool)).map((f) => f.name);
    t.true(
      before.includes('log_push_v2') && before.includes('log_push_v10') && before.includes('log_pop_v1'),
      'the old schema has every version',
    );

    const up = await migrate(oldPool);
    t.deepEqual(
      up.applied,
      (await loadMigrations()).filter((m) => m.version > MAIN_LAST_MIGRATION).map((m) => m.version),
    );
    t.deepEqual(
      up.functions,
      (await loadFunctionFiles()).map((f) => f.name),
    );

    const upgraded = await functionsOf(oldPool);
    const clean = await functionsOf(freshPool);
    t.deepEqual(
      upgraded.map((f) => f.signature),
      clean.map((f) => f.signature),
      'the same function signatures',
    );
    t.deepEqual(
      upgraded.map((f) => [f.signature, f.def]),
      clean.map((f) => [f.signature, f.def]),
      'pg_get_functiondef byte for byte',
    );
    await assertHoldsTheFiles(t, oldPool, 'upgraded');
    await assertHoldsTheFiles(t, freshPool, 'fresh');
    t.deepEqual(await migrate(oldPool), { applied: [], functions: [] }, 'a second start changes nothing');
  } finally {
    await oldPool.end();
    await freshPool.end();
    await old.drop();
    await fresh.drop();
  }
});

test('the migrator applies a function file again when its checksum changes, and only then', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'queen-sql-'));
  const db = await createTestDatabase('sql_reapply', { empty: true });
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  try {
    await cp(SQL_DIR, `${dir}/`, { recursive: true });
    const fdir = functionsDirOf(`${dir}/`);
    const names = (await loadFunctionFiles(`${dir}/`)).map((f) => f.name);
    const first = await migrate(pool, `${dir}/`);
    t.deepEqual(first.functions, names);
    t.deepEqual(await migrate(pool, `${dir}/`), { applied: [], functions: [] }, 'unchanged files are not applied');

    const lag = await readFile(`${fdir}lag.sql`, 'utf8');
    t.true(lag.includes('AS $$\n'));
    await writeFile(
      `${fdir}lag.sql`,
      lag.replace('AS $$\n', () => 'AS $$\n    -- edited by the test\n'),
    );
    const recordedBefore = await recordedFiles(pool);
    t.deepEqual(await migrate(pool, `${dir}/`), { applied: [], functions: ['lag'] }, 'only the changed file');
    const src = (await functionsOf(pool)).find((f) => f.name === 'consumer_lag_v1')!.src;
    t.true(src.startsWith('\n    -- edited by the test\n'), 'the new body is live');
    const recordedAfter = await recordedFiles(pool);
    t.not(recordedAfter.lag, recordedBefore.lag);
    t.deepEqual({ ...recordedAfter, lag: '' }, { ...recordedBefore, lag: '' }, 'the other records are untouched');
    t.deepEqual(await migrate(pool, `${dir}/`), { applied: [], functions: [] });

    // A file that fails rolls back with its record: nothing half-applied, and the next start tries again.
    await writeFile(
      `${fdir}zz_broken.sql`,
      'CREATE OR REPLACE FUNCTION queen.zz_ok_v1() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n' +
        'CREATE OR REPLACE FUNCTION queen.zz_broken_v1() RETURNS int LANGUAGE sql AS $$ SELECT no_such_column FROM queen.queues $$;\n',
    );
    await t.throwsAsync(migrate(pool, `${dir}/`), { message: /function file zz_broken\.sql/ });
    t.false(
      (await functionsOf(pool)).some((f) => f.name.startsWith('zz_')),
      'the failed file left no function',
    );
    t.is((await recordedFiles(pool)).zz_broken, undefined);
    await rm(`${fdir}zz_broken.sql`);
    t.deepEqual(await migrate(pool, `${dir}/`), { applied: [], functions: [] });
  } finally {
    await pool.end();
    await db.drop();
    await rm(dir, { recursive: true, force: true });
  }
});

// --- The rolling-upgrade pair: log_push_v11 (an old broker) and log_push_v12 (reading the runs below compacted_upto) on one partition.

interface Item {
  txn: string;
  /** The message id this attempt carries (a retry carries a new one; its answer names the original's). */
  id: Buffer;
}

interface Verdict {
  base: number | null;
  probed: boolean;
  /** item index -> original offset and id */
  dups: Map<number, { off: number; id: string }>;
  refuted: number[];
}

const WINDOW = 3600;
/** A pool (autocommit) or one session. */
type Queryable = Pick<pg.PoolClient, 'query'>;
let serial = 0;
const fresh = (tag: string): Item => ({ txn: `${tag}-${serial++}`, id: uuidv7Bytes() });
const retry = (i: Item): Item => ({ txn: i.txn, id: uuidv7Bytes() });

function hashesOf(items: readonly Item[]): Buffer {
  const h = Buffer.alloc(items.length * HASH_BYTES);
  items.forEach((it, i) => hashTransactionId(it.txn, h, i * HASH_BYTES));
  return h;
}

const blobOf = (items: readonly Item[]) =>
  packSegment(items.map((it) => frameOf({ id: it.id, transactionId: it.txn, payload: Buffer.from('{}') })));

/** hinted: items that carry no frame, each named at an offset (runs of one), after the frames. */
async function pushVia(
  sql: string,
  c: Queryable,
  pid: string,
  items: readonly Item[],
  verified: number,
  hinted: readonly { item: Item; off: number }[] = [],
): Promise<Verdict> {
  const blob = blobOf(items);
  const r = await c.query(sql, [
    [pid],
    [verified],
    [WINDOW],
    [items.length],
    [hinted.length],
    Buffer.concat([hashesOf(items), hashesOf(hinted.map((h) => h.item))]),
    [blob.length],
    blob,
    [hinted.length],
    hinted.map((_, k) => items.length + k),
    hinted.map((h) => h.off),
    hinted.map(() => 1),
  ]);
  const row = r.rows[0];
  const dups = new Map<number, { off: number; id: string }>();
  ((row.dup_idx as number[] | null) ?? []).forEach((idx, k) =>
    dups.set(idx, { off: Number((row.dup_offsets as string[])[k]), id: uuidToString(row.dup_ids as Buffer, k * 16) }),
  );
  return {
    base: row.assigned_base === null ? null : Number(row.assigned_base),
    probed: row.probed,
    dups,
    refuted: (row.refuted_idx as number[] | null) ?? [],
  };
}

const PUSH_V11 = `SELECT assigned_base, probed, dup_idx, dup_offsets, dup_ids, refuted_idx
  FROM queen.log_push_v11($1::bigint[], $2::bigint[], $3::integer[], $4::integer[], $5::integer[], $6::bytea, $7::integer[], $8::bytea,
                          $9::integer[], $10::integer[], $11::bigint[], $12::integer[])`;
const PUSH_V12 = `SELECT assigned_base, probed, dup_idx, dup_offsets, dup_ids, refuted_idx
  FROM queen.log_push_v12($1::bigint[], $2::bigint[], $3::integer[], $4::integer[], $5::integer[], $6::bytea, $7::integer[], $8::bytea,
                          $9::integer[], $10::integer[], $11::bigint[], $12::integer[])`;
const pushV11 = (
  c: Queryable,
  pid: string,
  items: readonly Item[],
  verified: number,
  hinted: readonly { item: Item; off: number }[] = [],
) => pushVia(PUSH_V11, c, pid, items, verified, hinted);
const pushV12 = (
  c: Queryable,
  pid: string,
  items: readonly Item[],
  verified: number,
  hinted: readonly { item: Item; off: number }[] = [],
) => pushVia(PUSH_V12, c, pid, items, verified, hinted);
/** One compaction call (a run of everything above compacted_upto, fan-out 2 so merges happen too). */
const compact = (c: Queryable, pid: string) => c.query('SELECT * FROM queen.log_compact_v1($1, 1, 2)', [pid]);

type Push = (c: Queryable, pid: string, items: readonly Item[], verified: number) => Promise<Verdict>;

/** A Map's entries in key order, for comparisons that must not depend on insertion order. */
const entries = <K extends string | number, V>(m: ReadonlyMap<K, V>) =>
  [...m.entries()].sort(([a], [b]) => (typeof a === 'number' && typeof b === 'number' ? a - b : String(a).localeCompare(String(b))));

test("a broker of an older release, starting on a newer release's schema, leaves the function files alone", async (t) => {
  const newer = await mkdtemp(join(tmpdir(), 'queen-sql-newer-'));
  const db = await createTestDatabase('sql_older_broker', { empty: true });
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  try {
    // The newer release: one more migration, which drops a version its
    // files no longer define; and a changed function file.
    await cp(SQL_DIR, `${newer}/`, { recursive: true });
    const last = (await loadMigrations()).at(-1)!.version;
    const next = String(last + 1).padStart(6, '0');
    await writeFile(`${newer}/${next}_newer_release.sql`, 'CREATE TABLE queen.newer_release_marker (id int);\n');
    const lagFile = `${functionsDirOf(`${newer}/`)}lag.sql`;
    await writeFile(
      lagFile,
      (await readFile(lagFile, 'utf8')).replace('AS $$\n', () => 'AS $$\n    -- newer release\n'),
    );
    t.deepEqual((await migrate(pool, `${newer}/`)).applied.at(-1), last + 1);
    const before = { files: await recordedFiles(pool), fns: await functionsOf(pool) };

    // A broker of this release restarts mid-upgrade: its files are older.
    const r = await migrate(pool);
    t.deepEqual(r, { applied: [], functions: [], newerSchema: last + 1 });
    t.deepEqual(await recordedFiles(pool), before.files, 'no checksum re-recorded');
    t.deepEqual(await functionsOf(pool), before.fns, "the newer release's definitions stay");
    t.true((await functionsOf(pool)).find((f) => f.name === 'consumer_lag_v1')!.src.includes('-- newer release'));
  } finally {
    await pool.end();
    await db.drop();
    await rm(newer, { recursive: true, force: true });
  }
});

test('rolling upgrade: log_push_v11 and log_push_v12 interleaved on one partition, with compactions between, give exact verdicts', async (t) => {
  const db = await createTestDatabase('sql_rolling');
  const pool = new pg.Pool({ connectionString: db.url, max: 3 });
  try {
    const pid = String(
      (await pool.query(`SELECT partition_id FROM queen.log_provision_v1(ARRAY['rolling'], ARRAY['p'])`)).rows[0].partition_id,
    );
    /** The oracle: every stored transactionId, its offset and the id it was stored with. */
    const stored = new Map<string, { off: number; id: string }>();

    /** One broker's push: the verdict must match the oracle; a segment with duplicates writes nothing, so its new frames go again. */
    const brokerPush = async (push: Push, label: string, items: readonly Item[]) => {
      const v = await push(pool, pid, items, -1);
      const expected = new Map<number, { off: number; id: string }>();
      items.forEach((it, i) => {
        const s = stored.get(it.txn);
        if (s) expected.set(i, s);
      });
      t.deepEqual(
        entries(v.dups),
        entries(expected),
        `${label}: exactly the stored ids are duplicates, each answering its original's offset and id`,
      );
      const rest = items.filter((_, i) => !expected.has(i));
      let base = v.base;
      if (expected.size > 0) {
        t.is(v.base, null, `${label}: a segment with a duplicate writes nothing`);
        if (rest.length === 0) return;
        const again = await push(pool, pid, rest, -1);
        t.is(again.dups.size, 0, `${label}: the re-submitted new frames are new`);
        base = again.base;
      }
      t.not(base, null);
      rest.forEach((it, i) => stored.set(it.txn, { off: base! + i, id: uuidToString(it.id) }));
    };

    // 1. Sequential interleave: each round (v11 and v12 in turn) sends three new ids and re-sends one
    //    id of each of the three rounds before it: two stored by the other version, one by its own.
    //    Every third round compacts first, so v12 finds some originals through the runs and some in
    //    the tail, and v11 (which ignores runs) still reads every row.
    const freshOf: Item[][] = [];
    for (let round = 0; round < 12; round++) {
      const [push, label] = round % 2 === 0 ? [pushV11, `v11 round ${round}`] : [pushV12, `v12 round ${round}`];
      if (round % 3 === 2) await compact(pool, pid);
      const news = [fresh('seq'), fresh('seq'), fresh('seq')];
      const items = [...news];
      for (const back of [1, 2, 3]) {
        if (round - back >= 0) items.splice(back, 0, retry(freshOf[round - back]![(round + back) % 3]!));
      }
      freshOf.push(news);
      await brokerPush(push, label, items);
    }
    t.is(stored.size, 36, 'every new id stored once (12 rounds x 3)');
    const runs = await pool.query('SELECT count(*)::int AS n FROM queen.log_hash_runs WHERE partition_id = $1', [pid]);
    t.true(runs.rows[0].n > 0, 'v12 read runs: the partition has some');

    // 2. Races: the same new ids pushed at once through both versions, on two sessions, while a
    //    third session compacts. Both versions lock the partition row before probing, so exactly
    //    one stores them and the other answers every one as a duplicate of the winner's.
    for (let race = 0; race < 8; race++) {
      const ids = [fresh('race'), fresh('race'), fresh('race'), fresh('race')];
      const a = ids.map(retry);
      const b = ids.map(retry);
      const [c1, c2, c3] = [await pool.connect(), await pool.connect(), await pool.connect()];
      let v11: Verdict, v12: Verdict;
      try {
        [v11, v12] = await Promise.all([pushV11(c1, pid, a, -1), pushV12(c2, pid, b, -1), compact(c3, pid)]);
      } finally {
        c1.release();
        c2.release();
        c3.release();
      }
      const [winner, winItems, loser] = v11.base !== null ? [v11, a, v12] : [v12, b, v11];
      t.not(winner.base, null, `race ${race}: one version stored the ids`);
      t.is(winner.dups.size, 0);
      t.is(loser.base, null, `race ${race}: the other wrote nothing`);
      t.deepEqual(
        entries(loser.dups),
        winItems.map((it, i) => [i, { off: winner.base! + i, id: uuidToString(it.id) }]),
        `race ${race}: the other's answers carry the winner's offsets and ids`,
      );
      winItems.forEach((it, i) => stored.set(it.txn, { off: winner.base! + i, id: uuidToString(it.id) }));
    }

    // 3. Everything compacted: a v12 probe of every stored id reads no tail at all and still
    //    answers each one with its original (MIN offset, id); v11 answers the same from log_txns.
    await compact(pool, pid);
    const cmp = await pool.query('SELECT compacted_upto = last_offset AS all_in FROM queen.log_partitions WHERE id = $1', [pid]);
    t.true(cmp.rows[0].all_in, 'the whole log is in runs');
    const everyId = [...stored.keys()].map((txn) => ({ txn, id: uuidv7Bytes() }));
    const expectedAll = everyId.map((it, i) => [i, stored.get(it.txn)!] as const);
    for (const [push, label] of [
      [pushV12, 'v12'],
      [pushV11, 'v11'],
    ] as const) {
      const v = await push(pool, pid, everyId, -1);
      t.is(v.base, null, `${label}: all duplicates, nothing written`);
      t.deepEqual(entries(v.dups), expectedAll, `${label}: every id answers its original's offset and id`);
    }

    // The log holds each transactionId once, at its offset, with the id its answers named.
    const log = await pool.query(
      'SELECT msg_offset, message_id::text AS id, transaction_id FROM queen.log_read_v1($1, 0, (SELECT last_offset FROM queen.log_partitions WHERE id = $1))',
      [pid],
    );
    const seen = new Map<string, { off: number; id: string }>();
    for (const r of log.rows) {
      t.false(seen.has(r.transaction_id), `${r.transaction_id} is stored once`);
      seen.set(r.transaction_id, { off: Number(r.msg_offset), id: r.id });
    }
    t.deepEqual(entries(seen), entries(stored));
  } finally {
    await pool.end();
    await db.drop();
  }
});
