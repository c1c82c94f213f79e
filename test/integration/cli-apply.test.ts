import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import anyTest, { type TestFn } from 'ava';
import { parse as parseYaml } from 'yaml';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * queenctl as a real process (node dist/src/cli/queenctl.js) against a real
 * HttpApi that requires a token, which the CLI reads from QUEEN_TOKEN.
 */

const TOKEN = 'cli-token';
const QUEENCTL = fileURLToPath(new URL('../../src/cli/queenctl.js', import.meta.url));

interface Ctx extends HttpStack {
  dir: string;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const stack = await startHttpStack('cli_apply', { maxPayloadBytes: 1024, authToken: TOKEN });
  const dir = await mkdtemp(join(tmpdir(), 'queenctl-'));
  t.context = { ...stack, dir };
});

teardownAndCheckLeaks(test, async (t) => {
  await t.context.stop?.();
  if (t.context.dir) await rm(t.context.dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function queenctl(t: { context: Ctx }, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [QUEENCTL, ...args],
      { env: { PATH: process.env.PATH ?? '', QUEEN_URL: t.context.api.url, QUEEN_TOKEN: TOKEN, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

async function manifest(t: { context: Ctx }, name: string, text: string): Promise<string> {
  const path = join(t.context.dir, name);
  await writeFile(path, text);
  return path;
}

async function stored(t: { context: Ctx }, queue: string): Promise<number | undefined> {
  const r = await t.context.sql.query('SELECT dedup_window_seconds FROM queen.queues WHERE name = $1', [queue]);
  return r.rows[0]?.dedup_window_seconds;
}

test('apply -f round trip: a multi-document file is applied and get -o json shows it', async (t) => {
  const file = await manifest(
    t,
    'rt.yaml',
    [
      'kind: Queue',
      'name: rt-orders',
      'config:',
      '  dedupWindowSeconds: 0',
      '---',
      'kind: Queue',
      'name: rt-payments',
      'config:',
      '  dedupWindowSeconds: 900',
      '',
    ].join('\n'),
  );
  const applied = await queenctl(t, ['apply', '-f', file]);
  t.is(applied.code, 0, applied.stderr);
  t.deepEqual(applied.stdout.trim().split('\n'), [
    'queue/rt-orders created (dedupWindowSeconds=0 retentionSeconds=0 completedRetentionSeconds=0 leaseTime=300 retryLimit=3)',
    'queue/rt-payments created (dedupWindowSeconds=900 retentionSeconds=0 completedRetentionSeconds=0 leaseTime=300 retryLimit=3)',
  ]);

  const json = await queenctl(t, ['get', 'queue', 'rt-orders', '-o', 'json']);
  t.is(json.code, 0, json.stderr);
  const got = JSON.parse(json.stdout);
  t.like(got, { queue: 'rt-orders', options: { dedupWindowSeconds: 0 }, partitions: 0 });
  t.deepEqual(got, await t.context.client.queue('rt-orders').get());

  const yaml = await queenctl(t, ['get', 'queue', 'rt-payments', '-o', 'yaml']);
  t.like(parseYaml(yaml.stdout), { queue: 'rt-payments', options: { dedupWindowSeconds: 900 } });
  const table = await queenctl(t, ['get', 'queue', 'rt-payments']);
  const [header, row] = table.stdout.trim().split('\n');
  t.regex(header!, /^NAME\s+DEDUP WINDOW \(S\)\s+PARTITIONS\s+CREATED\s+UPDATED$/);
  t.regex(row!, /^rt-payments\s+900\s+0\s+\d{4}-/);

  // Applying the same file again changes nothing and says so per queue.
  const again = await queenctl(t, ['apply', '-f', file]);
  t.deepEqual(again.stdout.trim().split('\n'), [
    'queue/rt-orders configured (dedupWindowSeconds=0 retentionSeconds=0 completedRetentionSeconds=0 leaseTime=300 retryLimit=3)',
    'queue/rt-payments configured (dedupWindowSeconds=900 retentionSeconds=0 completedRetentionSeconds=0 leaseTime=300 retryLimit=3)',
  ]);
});

test('apply sends replace: an option the manifest omits returns to its default', async (t) => {
  await t.context.client.queue('rp-q').configure({ dedupWindowSeconds: 0 });
  const file = await manifest(t, 'rp.json', JSON.stringify({ kind: 'Queue', name: 'rp-q' }));
  const r = await queenctl(t, ['apply', '-f', file]);
  t.is(r.code, 0, r.stderr);
  t.is(await stored(t, 'rp-q'), 3600);
});

test('--dry-run shows the diff against the live config and applies nothing', async (t) => {
  await t.context.client.queue('dr-live').configure({ dedupWindowSeconds: 3600 });
  await t.context.client.queue('dr-same').configure({ dedupWindowSeconds: 60 });
  const file = await manifest(
    t,
    'dr.yaml',
    [
      'kind: Queue',
      'name: dr-live',
      'config: {dedupWindowSeconds: 0}',
      '---',
      'kind: Queue',
      'name: dr-new',
      '---',
      'kind: Queue',
      'name: dr-same',
      'config: {dedupWindowSeconds: 60}',
      '',
    ].join('\n'),
  );
  const r = await queenctl(t, ['apply', '-f', file, '--dry-run']);
  t.is(r.code, 0, r.stderr);
  t.deepEqual(r.stdout.split('\n'), [
    '~ queue/dr-live (would be changed)',
    '    - dedupWindowSeconds: 3600',
    '    + dedupWindowSeconds: 0',
    '+ queue/dr-new (would be created)',
    '    + dedupWindowSeconds: 3600',
    '    + retentionSeconds: 0',
    '    + completedRetentionSeconds: 0',
    '    + leaseTime: 300',
    '    + retryLimit: 3',
    '  queue/dr-same (unchanged)',
    'dry run: nothing was applied',
    '',
  ]);
  t.is(await stored(t, 'dr-live'), 3600);
  t.is(await stored(t, 'dr-new'), undefined);
});

test('an unknown key fails the whole file with file and line; nothing is applied', async (t) => {
  const file = await manifest(
    t,
    'unknown.yaml',
    [
      'kind: Queue',
      'name: uk-first',
      '---',
      'kind: Queue',
      'name: uk-second',
      'config:',
      '  dedupWindowSeconds: 10',
      '  dedupWindow: 5',
      '',
    ].join('\n'),
  );
  const r = await queenctl(t, ['apply', '-f', file]);
  t.is(r.code, 1);
  t.regex(r.stderr, /nothing was applied/);
  t.true(
    r.stderr.includes(
      `${file}:8:3: unknown key "config.dedupWindow" (known options: dedupWindowSeconds, retentionSeconds, completedRetentionSeconds, leaseTime, retryLimit)`,
    ),
    r.stderr,
  );
  t.is(await stored(t, 'uk-first'), undefined, 'the valid document before it was not applied either');

  const top = await manifest(t, 'unknown-top.yaml', 'kind: Queue\nname: uk-top\nlabels: {team: x}\n');
  const r2 = await queenctl(t, ['apply', '-f', top]);
  t.is(r2.code, 1);
  t.true(r2.stderr.includes(`${top}:3:1: unknown key "labels" (allowed: kind, name, config)`), r2.stderr);
});

test('a duplicate key fails with file and line', async (t) => {
  const file = await manifest(t, 'dup.yaml', 'kind: Queue\nname: dk-q\nconfig:\n  dedupWindowSeconds: 0\n  dedupWindowSeconds: 3600\n');
  const r = await queenctl(t, ['apply', '-f', file]);
  t.is(r.code, 1);
  t.true(r.stderr.includes(`${file}:5:3: duplicate key "dedupWindowSeconds"`), r.stderr);
  t.is(await stored(t, 'dk-q'), undefined);
});

test('a wrong type fails with file and line', async (t) => {
  const file = await manifest(t, 'type.yaml', 'kind: Queue\nname: wt-q\nconfig:\n  dedupWindowSeconds: one hour\n');
  const r = await queenctl(t, ['apply', '-f', file]);
  t.is(r.code, 1);
  t.true(r.stderr.includes(`${file}:4:23: config.dedupWindowSeconds must be an integer`), r.stderr);
});

test('push through the CLI: queued, then duplicate with the same id', async (t) => {
  const first = await queenctl(t, ['push', 'cli-push', '--partition', 'customer-42', '--txn', 'order-1', '{"amount": 5}']);
  t.is(first.code, 0, first.stderr);
  const m = /^queued id=(\S+) offset=0 queue=cli-push partition=customer-42 transactionId=order-1$/.exec(first.stdout.trim());
  t.truthy(m, first.stdout);
  const again = await queenctl(t, ['push', 'cli-push', '--partition', 'customer-42', '--txn', 'order-1', '-o', 'json', '{"amount": 5}']);
  t.is(again.code, 0);
  t.like(JSON.parse(again.stdout), { status: 'duplicate', id: m![1], offset: 0, transactionId: 'order-1' });
  const dflt = await queenctl(t, ['push', 'cli-push', '[1,2]']);
  t.regex(dflt.stdout, /^queued .* partition=Default transactionId=[0-9a-f-]{36}\n$/);
});

test('exit codes: 2 for usage mistakes, 1 for refusals and unreachable servers', async (t) => {
  const usage: string[][] = [
    [],
    ['frobnicate'],
    ['apply'],
    ['apply', '-f', 'x', 'extra'],
    ['get', 'queue'],
    ['get', 'topic', 'x'],
    ['get', 'queue', 'x', '-o', 'xml'],
    ['push', 'q'],
    ['push', 'q', '{bad json'],
    ['get', 'queue', 'x', '--dry-run'],
    ['--nope'],
  ];
  for (const args of usage) {
    const r = await queenctl(t, args);
    t.is(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    t.regex(r.stderr, /^queenctl: /);
  }
  const help = await queenctl(t, ['--help']);
  t.is(help.code, 0);
  t.regex(help.stdout, /^usage: queenctl/);

  const missing = await queenctl(t, ['get', 'queue', 'never-there']);
  t.is(missing.code, 1);
  t.regex(missing.stderr, /queue "never-there" does not exist \(HTTP 404/);
  const noToken = await queenctl(t, ['get', 'queue', 'rt-orders'], { QUEEN_TOKEN: '' });
  t.is(noToken.code, 1);
  t.regex(noToken.stderr, /HTTP 401/);
  const flagWins = await queenctl(t, ['get', 'queue', 'never-there', '--token', TOKEN], { QUEEN_TOKEN: 'wrong' });
  t.regex(flagWins.stderr, /HTTP 404/, '--token overrides QUEEN_TOKEN');
  const failedItem = await queenctl(t, ['push', 'bad queue!', '1']);
  t.is(failedItem.code, 1);
  t.regex(failedItem.stderr, /push failed: queue must be/);
  const noFile = await queenctl(t, ['apply', '-f', join(t.context.dir, 'absent.yaml')]);
  t.is(noFile.code, 1);
  t.regex(noFile.stderr, /cannot read .*absent\.yaml/);
});

test('an unreachable server is exit code 1 with the reason', async (t) => {
  // A port that was just free: nothing listens there.
  const probe = net.createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((r) => probe.close(() => r()));
  const r = await queenctl(t, ['get', 'queue', 'x', '--server', `http://127.0.0.1:${port}`]);
  t.is(r.code, 1);
  t.regex(r.stderr, /cannot reach the server: .*ECONNREFUSED.*after 4 attempts/);
});
