import test from 'ava';
import { loadMigrations } from '../../src/engine/migrate.js';
import { droppedByMigrations, parseFunctionFile, parseFunctionFiles, sourceTexts, splitSql } from '../helpers/sqlFunctions.js';

// The static half of docs/sql-layout.md's rules; the database half (what a
// migrated database holds) is test/integration/sql-layout.test.ts.

/** The first numbered migration of the function-file layout: from here on, migrations define no functions. */
const FIRST_LAYOUT_MIGRATION = 91;

const calledFrom = (text: string, name: string) => new RegExp(`\\bqueen\\.${name}\\b`).test(text);

test('function files hold only CREATE OR REPLACE FUNCTION and DROP FUNCTION statements, each function once', async (t) => {
  const files = await parseFunctionFiles();
  t.true(files.length >= 7, 'push, pop, ack, retention, timers, configure, lag');
  const seen = new Map<string, string>();
  for (const f of files) {
    t.true(f.functions.length > 0, `${f.file} defines functions`);
    for (const s of f.statements) {
      t.regex(
        s,
        /^(CREATE\s+OR\s+REPLACE\s+FUNCTION|DROP\s+FUNCTION\s+IF\s+EXISTS)\s+queen\./i,
        `${f.file}: a table, index or data change belongs in a numbered migration`,
      );
    }
    for (const fn of f.functions) {
      t.is(seen.get(fn.name), undefined, `${fn.name} is defined in one file only`);
      seen.set(fn.name, f.file);
    }
  }
});

test('sql/functions holds no version the code does not call, apart from the documented rolling-upgrade predecessors', async (t) => {
  const files = await parseFunctionFiles();
  const src = await sourceTexts();
  const fns = files.flatMap((f) => f.functions);
  const predecessors = new Set(files.flatMap((f) => f.predecessors));
  const defined = new Set(fns.map((f) => f.name));
  for (const p of predecessors) t.true(defined.has(p), `predecessor ${p} is defined where it is documented`);

  // Live: called from src/, or called by a live function or a predecessor (a helper), transitively.
  const live = new Set(fns.filter((f) => src.some((s) => calledFrom(s.text, f.name))).map((f) => f.name));
  for (let grew = true; grew;) {
    grew = false;
    for (const f of fns) {
      if (!live.has(f.name) && !predecessors.has(f.name)) continue;
      for (const g of fns) {
        if (!live.has(g.name) && calledFrom(f.body, g.name)) {
          live.add(g.name);
          grew = true;
        }
      }
    }
  }
  for (const f of fns) {
    if (predecessors.has(f.name)) {
      const callers = src.filter((s) => calledFrom(s.text, f.name)).map((s) => s.path);
      t.deepEqual(callers, [], `${f.name} is marked a predecessor, so no code of this release may call it`);
    } else {
      t.true(live.has(f.name), `${f.file}: ${f.name} is called by no code and no live function: drop it in a migration and remove it`);
    }
  }
  t.true(live.size >= 20, 'the source scan found the calls');
  // A predecessor is the previous version of a live function: one with the same name and a higher version is live.
  const versionOf = (name: string) => /^(.*)_v(\d+)$/.exec(name);
  for (const p of predecessors) {
    const [, base, v] = versionOf(p)!;
    const successors = [...live].filter((l) => versionOf(l)?.[1] === base && Number(versionOf(l)![2]) > Number(v));
    t.true(successors.length > 0, `predecessor ${p} has a live successor`);
  }
});

test('no function file re-creates a function a numbered migration drops, and the layout migrations define no functions', async (t) => {
  const defined = new Set((await parseFunctionFiles()).flatMap((f) => f.functions.map((fn) => fn.name)));
  const dropped = await droppedByMigrations();
  t.true(dropped.length > 0);
  for (const d of dropped) t.false(defined.has(d.name), `migration ${d.version} drops ${d.name}; its file must not hold it`);
  for (const m of await loadMigrations()) {
    if (m.version < FIRST_LAYOUT_MIGRATION) continue;
    for (const s of splitSql(m.sql)) {
      t.notRegex(s.text, /^CREATE\s+(OR\s+REPLACE\s+)?FUNCTION/i, `migration ${m.version}: functions live in sql/functions/`);
    }
  }
});

test('the parser sees through comments, strings and bodies', (t) => {
  const p = parseFunctionFile(
    'x.sql',
    [
      '-- rolling-upgrade predecessor: queen.old_v1',
      "-- CREATE TABLE queen.not_a_statement (x int); ';'",
      "CREATE OR REPLACE FUNCTION queen.a_v2(p text DEFAULT 'it''s; fine') RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;",
      'CREATE OR REPLACE FUNCTION queen.b_v1() RETURNS void LANGUAGE plpgsql AS $body$ BEGIN PERFORM 1; END $body$;',
      'CREATE TABLE queen.t (x int);',
    ].join('\n'),
  );
  t.deepEqual(
    p.functions.map((f) => [f.name, f.body]),
    [
      ['a_v2', ' SELECT 1; '],
      ['b_v1', ' BEGIN PERFORM 1; END '],
    ],
  );
  t.is(p.statements.length, 3);
  t.is(p.statements[2], 'CREATE TABLE queen.t (x int)');
  t.deepEqual(p.predecessors, ['old_v1']);
});
