import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import anyTest, { type TestFn } from 'ava';
import { parse as parseYaml } from 'yaml';
import { QueenHttpError } from '../../src/client/index.js';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * Listing queues: GET /api/v1/resources/queues (keyset pages by name), the
 * client's listQueues(), and `queenctl get queues` in every output format,
 * as a real process against a real HttpApi and PostgreSQL.
 */

const QUEENCTL = fileURLToPath(new URL('../../src/cli/queenctl.js', import.meta.url));
const test = anyTest as TestFn<HttpStack>;

test.before(async (t) => {
  t.context = await startHttpStack('cli_get');
  // Created out of name order; listed in name order.
  for (const [name, window] of [
    ['lq-c', 0],
    ['lq-a', 60],
    ['lq-b', 3600],
  ] as const) {
    await t.context.client.queue(name).configure({ dedupWindowSeconds: window });
  }
  await t.context.client
    .queue('lq-b')
    .partition('p1')
    .push([{ data: 1 }]);
  await t.context.client
    .queue('lq-b')
    .partition('p2')
    .push([{ data: 2 }]);
});

teardownAndCheckLeaks(test, async (t) => {
  await t.context.stop?.();
});

/** A queue's view without what changes by itself between two reads (the age of the oldest retained message). */
function stable<T>(q: T): T {
  const c = structuredClone(q) as { retention?: { oldestRetainedAgeSeconds?: unknown } };
  if (c.retention) delete c.retention.oldestRetainedAgeSeconds;
  return c as T;
}
const stableList = (l: { queues: unknown[]; next?: string }) => ({ ...l, queues: l.queues.map(stable) });

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

test('the API lists queues by name in keyset pages, each with the same fields as GET one queue', async (t) => {
  const { client } = t.context;
  const first = await client.listQueues({ limit: 2 });
  t.deepEqual(
    first.queues.map((q) => q.queue),
    ['lq-a', 'lq-b'],
  );
  t.is(first.next, 'lq-b');
  t.deepEqual(stable(first.queues[1]), stable(await client.queue('lq-b').get()));
  t.like(first.queues[1], { partitions: 2, options: { dedupWindowSeconds: 3600 } });
  const second = await client.listQueues({ limit: 2, after: first.next });
  t.deepEqual(stableList(second), { queues: [stable(await client.queue('lq-c').get())] });
  t.deepEqual(
    (await client.listQueues()).queues.map((q) => q.queue),
    ['lq-a', 'lq-b', 'lq-c'],
  );
});

test('bad list parameters are a 400 naming the parameter', async (t) => {
  for (const [opts, field] of [
    [{ limit: 0 }, 'limit'],
    [{ limit: 1001 }, 'limit'],
    [{ after: 'no spaces allowed' }, 'queue'],
  ] as const) {
    const err = await t.throwsAsync(t.context.client.listQueues(opts), { instanceOf: QueenHttpError });
    t.is(err?.status, 400);
    t.is(err?.field, field);
  }
});

test('queenctl get queues: a table, and the API answer as json or yaml', async (t) => {
  const table = await queenctl(t, ['get', 'queues']);
  t.is(table.code, 0, table.stderr);
  const [header, ...rows] = table.stdout.trim().split('\n');
  t.regex(header!, /^NAME\s+DEDUP WINDOW \(S\)\s+PARTITIONS\s+CREATED\s+UPDATED$/);
  t.is(rows.length, 3);
  t.regex(rows[0]!, /^lq-a\s+60\s+0\s+\d{4}-/);
  t.regex(rows[1]!, /^lq-b\s+3600\s+2\s+\d{4}-/);
  t.regex(rows[2]!, /^lq-c\s+0\s+0\s+\d{4}-/);

  const expected = (await t.context.client.listQueues()).queues;
  const json = await queenctl(t, ['get', 'queues', '-o', 'json']);
  t.deepEqual(stableList(JSON.parse(json.stdout)), stableList({ queues: expected }));
  const yaml = await queenctl(t, ['get', 'queues', '-o', 'yaml']);
  t.deepEqual(stableList(parseYaml(yaml.stdout)), stableList({ queues: expected }));

  // One queue through the plural, as kubectl allows; "get queue" alone needs a name.
  t.deepEqual(stable(JSON.parse((await queenctl(t, ['get', 'queues', 'lq-c', '-o', 'json'])).stdout)), stable(expected[2]));
  const missing = await queenctl(t, ['get', 'queue']);
  t.is(missing.code, 2);
  t.regex(missing.stderr, /get queue needs a queue NAME/);
});
