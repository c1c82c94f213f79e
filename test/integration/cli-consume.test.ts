import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import anyTest, { type TestFn } from 'ava';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';

/** queenctl pop / tail / get messages as a real process against a real HttpApi. */
const QUEENCTL = fileURLToPath(new URL('../../src/cli/queenctl.js', import.meta.url));
const test = anyTest as TestFn<HttpStack>;

test.before(async (t) => {
  t.context = await startHttpStack('cli_consume');
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.stop?.();
});

function queenctl(t: { context: HttpStack }, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [QUEENCTL, ...args],
      { env: { PATH: process.env.PATH ?? '', QUEEN_URL: t.context.api.url }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

test('pop prints without acking; pop --ack settles; get messages browses', async (t) => {
  await t.context.client.queue('cli-q').push([
    { transactionId: 'c1', data: { n: 1 } },
    { transactionId: 'c2', data: { n: 2 } },
  ]);
  const look = await queenctl(t, ['pop', 'cli-q', '--group', 'ops', '--batch', '5']);
  t.is(look.code, 0, look.stderr);
  t.regex(look.stdout, /c1\s.*\{"n":1\}/);
  t.regex(look.stdout, /leaseId [0-9a-f-]{36}/);
  // The lease is held: nothing more for the group now.
  t.regex((await queenctl(t, ['pop', 'cli-q', '--group', 'ops'])).stdout, /no messages/);

  const json = await queenctl(t, ['pop', 'cli-q', '--group', 'other', '--batch', '5', '--ack', '-o', 'json']);
  t.is(json.code, 0, json.stderr);
  const parsed = JSON.parse(json.stdout);
  t.deepEqual(
    parsed.messages.map((m: { transactionId: string }) => m.transactionId),
    ['c1', 'c2'],
  );
  t.deepEqual(parsed.acks, ['acked', 'acked']);
  t.regex((await queenctl(t, ['pop', 'cli-q', '--group', 'other'])).stdout, /no messages/);

  const browse = await queenctl(t, ['get', 'messages', 'cli-q', '--from', '1']);
  t.is(browse.code, 0, browse.stderr);
  t.notRegex(browse.stdout, /c1/);
  t.regex(browse.stdout, /Default\s+1\s+c2/);

  const bad = await queenctl(t, ['pop', 'cli-q', '--batch', '0']);
  t.is(bad.code, 2);
  t.regex(bad.stderr, /--batch/);
});

test('tail follows new messages until --max', async (t) => {
  await t.context.client.queue('cli-tail').push([{ transactionId: 'old', data: 'history' }]);
  const child = spawn(process.execPath, [QUEENCTL, 'tail', 'cli-tail', '--max', '2'], {
    env: { PATH: process.env.PATH ?? '', QUEEN_URL: t.context.api.url },
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  // Subscribed (its group exists, fixed at "new") and long-polling: only then are pushes "new".
  await waitFor(
    'tail to subscribe and wait',
    async () =>
      t.context.read.waiters.parked >= 1 &&
      (await t.context.sql.query("SELECT 1 FROM queen.log_groups WHERE consumer_group LIKE 'queenctl-tail-%'")).rowCount === 1,
    30_000,
    10,
  );
  await t.context.client.queue('cli-tail').push([{ transactionId: 'new1', data: 1 }]);
  await t.context.client.queue('cli-tail').push([{ transactionId: 'new2', data: 2 }]);
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  t.is(await exited, 0, 'tail exits by itself after --max messages');
  clearTimeout(timer);
  t.notRegex(out, /history/);
  t.regex(out, /new1/);
  t.regex(out, /new2/);
});
