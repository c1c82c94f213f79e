import test from 'ava';
import { ManifestError, parseManifests } from '../../src/cli/manifest.js';
import { desiredOptions, plan, renderPlan } from '../../src/cli/diff.js';
import { readCliEnv, DEFAULT_SERVER } from '../../src/cli/env.js';
import { QUEUE_OPTION_DEFAULTS, type QueueOptions } from '../../src/engine/queueConfig.js';

/** `queenctl apply -f` file checking: every problem with file:line:column, nothing applied on any. */

function problems(text: string): string[] {
  try {
    parseManifests(text, 'm.yaml');
  } catch (err) {
    if (err instanceof ManifestError) return err.problems.map((p) => `${p.line}:${p.col} ${p.message}`);
    throw err;
  }
  return [];
}

test('multi-document YAML: one manifest per document, empty documents skipped', (t) => {
  const ms = parseManifests('---\nkind: Queue\nname: a\nconfig:\n  dedupWindowSeconds: 0\n---\n---\nkind: Queue\nname: b\n', 'm.yaml');
  t.deepEqual(
    ms.map((m) => [m.name, m.config, m.line]),
    [
      ['a', { dedupWindowSeconds: 0 }, 2],
      ['b', {}, 8],
    ],
  );
});

test('JSON files and lists of manifests are accepted', (t) => {
  const one = parseManifests('{"kind": "Queue", "name": "j", "config": {"dedupWindowSeconds": 60}}', 'm.json');
  t.deepEqual(
    one.map((m) => [m.name, m.config]),
    [['j', { dedupWindowSeconds: 60 }]],
  );
  const list = parseManifests('[{"kind": "Queue", "name": "x"},\n {"kind": "Queue", "name": "y", "config": null}]', 'm.json');
  t.deepEqual(
    list.map((m) => [m.name, m.config, m.line]),
    [
      ['x', {}, 1],
      ['y', {}, 2],
    ],
  );
});

test('null in config means the default', (t) => {
  const [m] = parseManifests('kind: Queue\nname: n\nconfig:\n  dedupWindowSeconds: null\n', 'm.yaml');
  t.deepEqual(m!.config, { dedupWindowSeconds: null });
  t.deepEqual(desiredOptions(m!), {
    dedupWindowSeconds: 3600,
    retentionSeconds: 0,
    completedRetentionSeconds: 0,
    leaseTime: 300,
    retryLimit: 3,
  });
});

test('unknown keys are reported with their line, at the top level and in config', (t) => {
  t.deepEqual(problems('kind: Queue\nname: a\nspec:\n  x: 1\nconfig:\n  dedupWindowSeconds: 5\n  retention: 7\n'), [
    '3:1 unknown key "spec" (allowed: kind, name, config)',
    '7:3 unknown key "config.retention" (known options: dedupWindowSeconds, retentionSeconds, completedRetentionSeconds, leaseTime, retryLimit)',
  ]);
});

test('duplicate keys are reported with their line, in YAML and in JSON', (t) => {
  t.deepEqual(problems('kind: Queue\nname: a\nconfig:\n  dedupWindowSeconds: 0\n  dedupWindowSeconds: 5\n'), [
    '5:3 duplicate key "dedupWindowSeconds" (Map keys must be unique)',
  ]);
  t.deepEqual(problems('{\n  "kind": "Queue",\n  "name": "a",\n  "name": "b"\n}'), ['4:3 duplicate key "name" (Map keys must be unique)']);
});

test('wrong kinds, names and types are reported where they are written', (t) => {
  t.deepEqual(
    problems(
      [
        'kind: Topic', // 1
        'name: a',
        '---',
        'kind: Queue', // 4
        'name: "bad name!"',
        '---',
        'kind: Queue', // 7
        'name: c',
        'config:',
        '  dedupWindowSeconds: "60"', // 10
        '---',
        'kind: Queue', // 12
        'name: d',
        'config: [1]',
        '---',
        'name: e', // 16
        '---',
        '- 1', // 18
      ].join('\n'),
    ),
    [
      '1:7 kind must be Queue',
      '5:7 name: queue must be 1-128 characters of A-Z a-z 0-9 . _ -, and not "." or ".."',
      '10:23 config.dedupWindowSeconds must be an integer from 0 to 2592000, or null for the default',
      '14:9 config must be a mapping of queue options',
      '16:1 missing key "kind" (must be Queue)',
      '18:3 a manifest must be a mapping with kind, name and config',
    ],
  );
});

test('a queue defined twice, a syntax error, and an empty file are errors', (t) => {
  t.deepEqual(problems('kind: Queue\nname: a\n---\nkind: Queue\nname: a\n'), ['4:1 queue "a" is also defined at line 1']);
  const syntax = problems('kind: Queue\nname: [a\n');
  t.is(syntax.length, 1);
  t.regex(syntax[0]!, /^\d+:\d+ Flow sequence in block collection must be sufficiently indented and end with a \]$/);
  t.deepEqual(problems('# nothing here\n'), ['1:1 no manifests found (expected documents with kind: Queue)']);
});

test('the dry-run plan: create, change, unchanged', (t) => {
  const [m] = parseManifests('kind: Queue\nname: a\nconfig:\n  dedupWindowSeconds: 0\n', 'm.yaml');
  const live = (o: Partial<QueueOptions>): QueueOptions => ({ ...QUEUE_OPTION_DEFAULTS, ...o });
  t.deepEqual(renderPlan(plan(m!, undefined)), [
    '+ queue/a (would be created)',
    '    + dedupWindowSeconds: 0',
    '    + retentionSeconds: 0',
    '    + completedRetentionSeconds: 0',
    '    + leaseTime: 300',
    '    + retryLimit: 3',
  ]);
  t.deepEqual(renderPlan(plan(m!, live({ dedupWindowSeconds: 3600 }))), [
    '~ queue/a (would be changed)',
    '    - dedupWindowSeconds: 3600',
    '    + dedupWindowSeconds: 0',
  ]);
  t.deepEqual(renderPlan(plan(m!, live({ dedupWindowSeconds: 0 }))), ['  queue/a (unchanged)']);
  // An omitted option is compared with its default: apply sends mode "replace".
  const [bare] = parseManifests('kind: Queue\nname: b\n', 'm.yaml');
  t.is(plan(bare!, live({ dedupWindowSeconds: 0 })).action, 'change');
  t.is(plan(bare!, live({ retentionSeconds: 60 })).action, 'change');
});

test('queenctl reads exactly QUEEN_URL and QUEEN_TOKEN', (t) => {
  t.deepEqual(readCliEnv({}), { server: undefined, token: undefined });
  t.deepEqual(readCliEnv({ QUEEN_URL: ' http://h:1 ', QUEEN_TOKEN: 'x', QUEEN_HTTP_PORT: '9' }), { server: 'http://h:1', token: 'x' });
  t.is(DEFAULT_SERVER, 'http://127.0.0.1:6632');
});
