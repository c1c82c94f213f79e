import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import anyTest, { type TestFn } from 'ava';
import { buildInfo } from '../../src/telemetry/buildInfo.js';
import { QUEENCTL_VERSION } from '../../src/cli/version.js';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * queenctl as a real process against a real HttpApi and PostgreSQL: push
 * from standard input, dlq list / requeue, and version with the server's.
 */
const QUEENCTL = fileURLToPath(new URL('../../src/cli/queenctl.js', import.meta.url));
const test = anyTest as TestFn<HttpStack>;

test.before(async (t) => {
  t.context = await startHttpStack('cli_push_dlq');
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.stop?.();
});

function queenctl(t: { context: HttpStack }, args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [QUEENCTL, ...args],
      { env: { PATH: process.env.PATH ?? '', QUEEN_URL: t.context.api.url }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
    child.stdin!.end(stdin ?? '');
  });
}

test('push QUEUE - pushes every good line of stdin, in batches, each with its answer; a bad line loses nothing', async (t) => {
  const input = ['k1|{"n":1}', 'k2|{"n":2}', 'not a line', '', 'k3|{"n":3}', 'k4|"four"', 'k5|{"n":5}'].join('\n') + '\n';
  const r = await queenctl(t, ['push', 'stdin-q', '-', '--partition', 'p', '-K', '|', '--batch', '2'], input);
  t.is(r.code, 1, 'one line was invalid');
  const lines = r.stdout.trim().split('\n');
  t.is(lines.length, 6);
  t.regex(lines[0]!, /^line 1: queued id=[0-9a-f-]{36} offset=0 queue=stdin-q partition=p transactionId=k1$/);
  t.is(lines[2], 'line 3: invalid: has no "|" between the transactionId and the data (-K)');
  t.regex(lines[5]!, /^line 7: queued id=\S+ offset=4 queue=stdin-q partition=p transactionId=k5$/);
  t.regex(r.stderr, /pushed 6 lines: 5 queued, 0 duplicate, 0 failed, 1 invalid/);
  const page = await t.context.client.queue('stdin-q').browse({ partition: 'p' });
  t.deepEqual(
    page.messages.map((m) => [m.transactionId, m.data]),
    [
      ['k1', { n: 1 }],
      ['k2', { n: 2 }],
      ['k3', { n: 3 }],
      ['k4', 'four'],
      ['k5', { n: 5 }],
    ],
  );

  // The same input again: every keyed line is a duplicate of the first run, none is stored twice.
  const again = await queenctl(t, ['push', 'stdin-q', '-', '--partition', 'p', '-K', '|', '-o', 'json'], input);
  const answers = again.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { line: number; status: string; offset?: number });
  t.deepEqual(
    answers.map((a) => [a.line, a.status]),
    [
      [1, 'duplicate'],
      [2, 'duplicate'],
      [3, 'invalid'],
      [5, 'duplicate'],
      [6, 'duplicate'],
      [7, 'duplicate'],
    ],
  );
  t.is((await t.context.client.queue('stdin-q').browse({ partition: 'p' })).messages.length, 5);

  // --raw: lines are text; -o name: message/ID per line.
  const raw = await queenctl(t, ['push', 'stdin-raw', '-', '--raw', '-o', 'name'], 'plain one\nplain two\n');
  t.is(raw.code, 0, raw.stderr);
  const ids = raw.stdout.trim().split('\n');
  t.is(ids.length, 2);
  const stored = (await t.context.client.queue('stdin-raw').browse()).messages;
  t.deepEqual(
    ids,
    stored.map((m) => `message/${m.id}`),
  );
  t.deepEqual(
    stored.map((m) => m.data),
    ['plain one', 'plain two'],
  );
});

test('dlq list shows dead letters; dlq requeue pushes each back once and says so per id', async (t) => {
  const { client } = t.context;
  await client.queue('cli-dlq').push([
    { transactionId: 'poison-1', data: { bad: 1 } },
    { transactionId: 'poison-2', data: { bad: 2 } },
  ]);
  const popped = await client.queue('cli-dlq').pop({ group: 'billing', batch: 2 });
  t.is(popped.length, 2);
  await client.ack(popped, 'dlq', { error: 'cannot bill' });

  const list = await queenctl(t, ['dlq', 'list', 'cli-dlq']);
  t.is(list.code, 0, list.stderr);
  const rows = list.stdout.trim().split('\n');
  t.regex(rows[0]!, /^ID\s+PARTITION\s+GROUP\s+OFFSET\s+TRANSACTION ID\s+ATTEMPTS\s+CREATED\s+REQUEUED$/);
  t.regex(rows[1]!, /^\d+\s+Default\s+billing\s+0\s+poison-1\s/);
  t.regex(rows[2]!, /^\d+\s+Default\s+billing\s+1\s+poison-2\s/);
  t.regex((await queenctl(t, ['dlq', 'list', 'cli-dlq', '-o', 'wide'])).stdout, /cannot bill\s+\{"bad":2\}/);

  const names = (await queenctl(t, ['dlq', 'list', 'cli-dlq', '--group', 'billing', '-o', 'name'])).stdout.trim().split('\n');
  t.is(names.length, 2);
  t.true(names.every((n) => /^deadletter\/\d+$/.test(n)));
  const ids = names.map((n) => n.split('/')[1]!);
  t.deepEqual((await queenctl(t, ['dlq', 'list', 'cli-dlq', '--group', 'someone-else', '-o', 'name'])).stdout, '');
  const firstPage = await queenctl(t, ['dlq', 'list', 'cli-dlq', '--limit', '1']);
  t.regex(firstPage.stdout, new RegExp(`more after id ${ids[0]} \\(--after ${ids[0]}\\)`));
  t.regex((await queenctl(t, ['dlq', 'list', 'cli-dlq', '--after', ids[0]!])).stdout, /poison-2/);

  const requeue = await queenctl(t, ['dlq', 'requeue', ids[0]!]);
  t.is(requeue.code, 0, requeue.stderr);
  t.regex(
    requeue.stdout,
    new RegExp(`^deadletter/${ids[0]} requeued: queued id=\\S+ offset=2 partition=Default transactionId=poison-1#requeue-${ids[0]}\\n$`),
  );

  // Once only: the first id again is refused (409), the second still goes, the exit code says one failed.
  const both = await queenctl(t, ['dlq', 'requeue', ids[0]!, ids[1]!]);
  t.is(both.code, 1);
  t.regex(both.stdout, new RegExp(`^deadletter/${ids[1]} requeued: queued .*transactionId=poison-2#requeue-${ids[1]}\\n$`));
  t.regex(both.stderr, new RegExp(`deadletter/${ids[0]}: dead letter ${ids[0]} was requeued already \\(HTTP 409`));
  t.regex((await queenctl(t, ['dlq', 'requeue', '999999'])).stderr, /no dead letter with id 999999 \(HTTP 404/);

  // The copies are new messages the group gets again.
  const again = await client.queue('cli-dlq').pop({ group: 'billing', batch: 10 });
  t.deepEqual(
    again.map((m) => [m.transactionId, m.data]),
    [
      [`poison-1#requeue-${ids[0]}`, { bad: 1 }],
      [`poison-2#requeue-${ids[1]}`, { bad: 2 }],
    ],
  );
  const after = JSON.parse((await queenctl(t, ['dlq', 'list', 'cli-dlq', '-o', 'json'])).stdout) as {
    deadLetters: { requeuedAt: string | null }[];
  };
  t.true(after.deadLetters.every((d) => d.requeuedAt !== null));
});

test("version prints queenctl's version and the server's, from GET /api/v1/version", async (t) => {
  const build = buildInfo(undefined);
  const r = await queenctl(t, ['version']);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `queenctl ${QUEENCTL_VERSION}\nserver ${build.version} (commit ${build.commit})\n`);
  t.deepEqual(await t.context.client.version(), build);
  t.is((await queenctl(t, ['version', '-o', 'jsonpath={.server.commit}'])).stdout, build.commit);
  t.is((await queenctl(t, ['--version'])).stdout, `queenctl ${QUEENCTL_VERSION}\n`);

  // Like every /api route it takes the token.
  const secured = await t.context.addApi({ authToken: 'version-token' });
  t.is((await fetch(`${secured.url}/api/v1/version`)).status, 401);
  const ok = await fetch(`${secured.url}/api/v1/version`, { headers: { authorization: 'Bearer version-token' } });
  t.deepEqual(await ok.json(), build);
});
