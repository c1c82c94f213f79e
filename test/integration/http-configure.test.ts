import anyTest, { type TestFn } from 'ava';
import { QueenHttpError, type QueueOptionsPatch } from '../../src/client/index.js';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/** The full effective options: the retention options (docs/retention.md) keep their default 0 here. */
const all = (o: { dedupWindowSeconds: number }) => ({
  ...o,
  retentionSeconds: 0,
  completedRetentionSeconds: 0,
  leaseTime: 300,
  retryLimit: 3,
});

/** The /configure table (docs/configure.md) over HTTP, through the client. */

type Ctx = HttpStack;
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  t.context = await startHttpStack('http_configure', { poolSize: 24, maxPayloadBytes: 1024, clientRetries: 0 });
});

teardownAndCheckLeaks(test, async (t) => {
  await t.context.stop?.();
});

/** The stored value, read with SQL rather than through the API under test. */
async function stored(t: { context: Ctx }, queue: string): Promise<number | undefined> {
  const r = await t.context.sql.query('SELECT dedup_window_seconds FROM queen.queues WHERE name = $1', [queue]);
  return r.rows[0]?.dedup_window_seconds;
}

test('create starts from the defaults', async (t) => {
  const r = await t.context.client.queue('cfg-create').configure({});
  t.deepEqual(r, { queue: 'cfg-create', created: true, options: all({ dedupWindowSeconds: 3600 }) });
  t.is(await stored(t, 'cfg-create'), 3600);
  const again = await t.context.client.queue('cfg-create').configure({});
  t.false(again.created);
});

test('the edge: a queue created with dedup off stays off after a configure that omits the window', async (t) => {
  const q = t.context.client.queue('cfg-off');
  t.deepEqual((await q.configure({ dedupWindowSeconds: 0 })).options, all({ dedupWindowSeconds: 0 }));
  t.deepEqual((await q.configure({})).options, all({ dedupWindowSeconds: 0 }));
  t.deepEqual((await q.configure({}, { mode: 'merge' })).options, all({ dedupWindowSeconds: 0 }));
  t.is(await stored(t, 'cfg-off'), 0);
  // And it really is off: the same transactionId is written twice.
  const p = q.partition('p');
  const a = await p.push([{ transactionId: 'same', data: 1 }]);
  const b = await p.push([{ transactionId: 'same', data: 1 }]);
  t.deepEqual([a[0]!.status, b[0]!.status], ['queued', 'queued']);
});

test('a value sets; null restores the default', async (t) => {
  const q = t.context.client.queue('cfg-null');
  await q.configure({ dedupWindowSeconds: 60 });
  t.is(await stored(t, 'cfg-null'), 60);
  t.deepEqual((await q.configure({ dedupWindowSeconds: null })).options, all({ dedupWindowSeconds: 3600 }));
  t.is(await stored(t, 'cfg-null'), 3600);
});

test('replace re-derives omitted keys from the defaults; with a value it sets it', async (t) => {
  const q = t.context.client.queue('cfg-replace');
  await q.configure({ dedupWindowSeconds: 0 });
  t.deepEqual((await q.configure({}, { mode: 'replace' })).options, all({ dedupWindowSeconds: 3600 }));
  t.deepEqual((await q.configure({ dedupWindowSeconds: 7 }, { mode: 'replace' })).options, all({ dedupWindowSeconds: 7 }));
  t.deepEqual((await q.configure({ dedupWindowSeconds: null }, { mode: 'replace' })).options, all({ dedupWindowSeconds: 3600 }));
});

test('a queue made by a push has the default window and can then be configured', async (t) => {
  const q = t.context.client.queue('cfg-pushed');
  await q.partition('a').push([{ data: 1 }]);
  await q.partition('b').push([{ data: 1 }]);
  const info = await q.get();
  t.like(info, { queue: 'cfg-pushed', options: { dedupWindowSeconds: 3600 }, partitions: 2 });
  t.false(Number.isNaN(Date.parse(info.createdAt)));
  t.true(Date.parse(info.updatedAt) >= Date.parse(info.createdAt));
  const r = await q.configure({ dedupWindowSeconds: 120 });
  t.false(r.created);
  t.deepEqual((await q.get()).options, all({ dedupWindowSeconds: 120 }));
});

test('a window change takes effect on the push path', async (t) => {
  const q = t.context.client.queue('cfg-effect');
  const p = q.partition('p');
  await q.configure({ dedupWindowSeconds: 0 });
  await p.push([{ transactionId: 'k', data: 1 }]);
  t.is((await p.push([{ transactionId: 'k', data: 1 }]))[0]!.status, 'queued');
  await q.configure({ dedupWindowSeconds: null });
  const [dup] = await p.push([{ transactionId: 'k', data: 1 }]);
  t.is(dup!.status, 'duplicate');
  t.is(dup!.offset, 0, 'the earliest stored occurrence answers');
});

test('bad mode, unknown option and wrong types are 400 naming the key, and change nothing', async (t) => {
  const q = t.context.client.queue('cfg-invalid');
  await q.configure({ dedupWindowSeconds: 42 });
  const cases: [QueueOptionsPatch | Record<string, unknown>, { mode?: string }, string, RegExp][] = [
    [{ dedupWindowSeconds: 1 }, { mode: 'upsert' }, 'mode', /mode must be "merge" or "replace"/],
    [{ dedupWindowSeconds: 1 }, { mode: 'REPLACE' }, 'mode', /mode/],
    [{ windowSeconds: 1 }, {}, 'options.windowSeconds', /unknown option "windowSeconds"/],
    [{ dedupWindowSeconds: '60' }, {}, 'options.dedupWindowSeconds', /must be an integer/],
    [{ dedupWindowSeconds: true }, {}, 'options.dedupWindowSeconds', /must be an integer/],
    [{ dedupWindowSeconds: 2.5 }, {}, 'options.dedupWindowSeconds', /must be an integer/],
    [{ dedupWindowSeconds: 31 * 24 * 3600 }, {}, 'options.dedupWindowSeconds', /from 0 to 2592000/],
  ];
  for (const [options, opts, field, message] of cases) {
    const err = await t.throwsAsync(q.configure(options as QueueOptionsPatch, opts as { mode?: 'merge' }), { instanceOf: QueenHttpError });
    t.is(err.status, 400);
    t.is(err.field, field);
    t.regex(err.message, message);
  }
  t.is(await stored(t, 'cfg-invalid'), 42);
});

test('concurrent configures serialise: all succeed and the final value is one of them', async (t) => {
  const q = t.context.client.queue('cfg-race');
  const values = Array.from({ length: 20 }, (_, i) => 100 + i);
  const results = await Promise.all(values.map((v) => q.configure({ dedupWindowSeconds: v })));
  t.is(results.filter((r) => r.created).length, 1, 'exactly one of them created the queue');
  for (const [i, r] of results.entries()) t.is(r.options.dedupWindowSeconds, values[i]!, 'each answer shows its own write');
  const final = await stored(t, 'cfg-race');
  t.true(values.includes(final!));
  t.deepEqual((await q.get()).options, all({ dedupWindowSeconds: final! }));
});

test('concurrent merges of null and values never produce anything but a written value or the default', async (t) => {
  const q = t.context.client.queue('cfg-race-mixed');
  await q.configure({ dedupWindowSeconds: 0 });
  const bodies: QueueOptionsPatch[] = Array.from({ length: 20 }, (_, i) =>
    i % 3 === 0 ? { dedupWindowSeconds: null } : i % 3 === 1 ? {} : { dedupWindowSeconds: i },
  );
  await Promise.all(bodies.map((b) => q.configure(b)));
  const final = await stored(t, 'cfg-race-mixed');
  const allowed = new Set([3600, ...bodies.map((b) => b.dedupWindowSeconds).filter((v): v is number => typeof v === 'number')]);
  t.true(allowed.has(final!), `final ${final}`);
});
