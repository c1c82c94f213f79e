import test from 'ava';
import type { PushInput, PushOutcome } from '../../src/client/index.js';
import { parseLine, pushLines, readyBatches, type LineResult } from '../../src/cli/commands/pushLines.js';
import { fakeQueen, queenctlIn, type FakeRequest } from '../helpers/fakeQueen.js';

/** `queenctl push QUEUE -`: lines parsed, batched as they are ready, one answer per line. */

test('a line is JSON, or text with --raw; -K splits off the transactionId at the first separator', (t) => {
  t.deepEqual(parseLine('{"a":1}', { delimiter: undefined, raw: false }), { ok: true, item: { data: { a: 1 } } });
  t.deepEqual(parseLine('42\r', { delimiter: undefined, raw: false }), { ok: true, item: { data: 42 } }, 'a CRLF file reads the same');
  t.deepEqual(parseLine('hello world', { delimiter: undefined, raw: true }), { ok: true, item: { data: 'hello world' } });
  t.deepEqual(parseLine('order-9:{"a":"b:c"}', { delimiter: ':', raw: false }), {
    ok: true,
    item: { transactionId: 'order-9', data: { a: 'b:c' } },
  });
  t.deepEqual(parseLine('k1\t\ttext', { delimiter: '\t\t', raw: true }), { ok: true, item: { transactionId: 'k1', data: 'text' } });
  const notJson = parseLine('hello', { delimiter: undefined, raw: false });
  t.false(notJson.ok);
  t.regex((notJson as { error: string }).error, /must be JSON \(or use --raw\)/);
  t.deepEqual(parseLine('[1,2]', { delimiter: ':', raw: false }), {
    ok: false,
    error: 'has no ":" between the transactionId and the data (-K)',
  });
  t.deepEqual(parseLine(':1', { delimiter: ':', raw: false }), { ok: false, error: 'has an empty transactionId' });
});

async function* source(lines: string[], gate?: { at: number; open: Promise<void> }): AsyncGenerator<string> {
  for (const [i, l] of lines.entries()) {
    if (gate?.at === i) await gate.open;
    yield l;
  }
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

test('batches hold what is ready, at most max; a line that is not there yet is not waited for', async (t) => {
  const lines = Array.from({ length: 250 }, (_, i) => String(i));
  t.deepEqual(
    (await collect(readyBatches(source(lines), 100))).map((b) => b.length),
    [100, 100, 50],
  );
  t.deepEqual(await collect(readyBatches(source([]), 100)), []);
  // Three lines now, two more only after the first batch went out: as `tail -f log | queenctl push q -`.
  let open!: () => void;
  const gate = { at: 3, open: new Promise<void>((resolve) => (open = resolve)) };
  const seen: string[][] = [];
  for await (const b of readyBatches(source(['a', 'b', 'c', 'd', 'e'], gate), 100)) {
    seen.push(b);
    if (seen.length === 1) open();
  }
  t.deepEqual(seen, [
    ['a', 'b', 'c'],
    ['d', 'e'],
  ]);
});

function fakeSend(calls: PushInput[][], fail?: (items: PushInput[]) => Error | undefined) {
  let offset = 0;
  return async (items: PushInput[]): Promise<PushOutcome[]> => {
    calls.push(items);
    const err = fail?.(items);
    if (err) throw err;
    return items.map((it) => {
      const bad = it.data === 'reject-me';
      return {
        status: bad ? 'failed' : it.transactionId === 'dup' ? 'duplicate' : 'queued',
        id: bad ? null : `id-${offset}`,
        transactionId: it.transactionId ?? 'minted',
        offset: bad ? null : offset++,
        queue: 'q',
        partition: 'Default',
        ...(bad ? { error: 'refused' } : {}),
      };
    });
  };
}

test('every line gets its own answer in order; a bad line is skipped, the lines around it are pushed', async (t) => {
  const calls: PushInput[][] = [];
  const results: LineResult[] = [];
  const summary = await pushLines(
    ['{"n":1}', 'not json', '', '"reject-me"', '{"n":2}', '{"n":3}'],
    fakeSend(calls),
    { batch: 2, delimiter: undefined, raw: false },
    (r) => results.push(r),
  );
  t.deepEqual(
    results.map((r) => [r.line, r.status]),
    [
      [1, 'queued'],
      [2, 'invalid'],
      [4, 'failed'],
      [5, 'queued'],
      [6, 'queued'],
    ],
    'line numbers are the input’s (the empty line 3 is skipped, not renumbered)',
  );
  t.like(results[0], { line: 1, status: 'queued', id: 'id-0', offset: 0 });
  t.like(results[2], { line: 4, status: 'failed', error: 'refused' });
  t.deepEqual(summary, { lines: 5, queued: 3, duplicate: 0, failed: 1, invalid: 1 });
  t.true(calls.every((c) => c.length <= 2));
  t.deepEqual(
    calls.flat().map((c) => c.data),
    [{ n: 1 }, 'reject-me', { n: 2 }, { n: 3 }],
  );
});

test('a request that fails as a whole stops the run: earlier lines stay answered, its lines are not confirmed, no later line is read', async (t) => {
  const calls: PushInput[][] = [];
  const results: LineResult[] = [];
  let read = 0;
  async function* lines() {
    for (const l of ['1', '2', 'x', '3', '4', '5', '6']) {
      read++;
      yield l;
    }
  }
  const boom = new Error('no server');
  const summary = await pushLines(
    lines(),
    fakeSend(calls, (items) => (items.some((i) => i.data === 3) ? boom : undefined)),
    { batch: 2, delimiter: undefined, raw: false },
    (r) => results.push(r),
  );
  t.deepEqual(
    results.map((r) => [r.line, r.status]),
    [
      [1, 'queued'],
      [2, 'queued'],
      [3, 'invalid'],
    ],
  );
  t.deepEqual(summary.stopped, { from: 3, to: 4, error: boom }, 'the batch of lines 3 (invalid) and 4');
  t.true(read <= 6, `read ${read} lines`);
});

async function pushApi(t: { teardown(fn: () => Promise<void>): void }) {
  let offset = 0;
  const fake = await fakeQueen({
    'POST /api/v1/push': (r: FakeRequest) => {
      const items = (r.body as { items: { queue: string; partition: string; transactionId: string; payload: unknown }[] }).items;
      return {
        body: items.map((it, index) => ({
          index,
          messageId: `m${offset}`,
          transactionId: it.transactionId,
          message_id: `m${offset}`,
          transaction_id: it.transactionId,
          queue: it.queue,
          partition: it.partition,
          status: 'queued',
          offset: offset++,
        })),
      };
    },
  });
  t.teardown(() => fake.close());
  return { fake, env: { QUEEN_URL: fake.url } };
}

test('queenctl push QUEUE - pushes stdin in batches and reports each line; a bad line fails the run without losing the others', async (t) => {
  const { fake, env } = await pushApi(t);
  const r = await queenctlIn(['push', 'orders', '-', '--partition', 'p1', '-K', ':', '--batch', '2'], {
    env,
    stdin: source(['a:{"n":1}', 'b:{"n":2}', 'no-separator', 'c:{"n":3}']),
  });
  t.is(r.code, 1);
  t.deepEqual(r.out.split('\n'), [
    'line 1: queued id=m0 offset=0 queue=orders partition=p1 transactionId=a',
    'line 2: queued id=m1 offset=1 queue=orders partition=p1 transactionId=b',
    'line 3: invalid: has no ":" between the transactionId and the data (-K)',
    'line 4: queued id=m2 offset=2 queue=orders partition=p1 transactionId=c',
    '',
  ]);
  t.regex(r.err, /pushed 4 lines: 3 queued, 0 duplicate, 0 failed, 1 invalid/);
  t.regex(r.err, /1 of 4 lines were not pushed/);
  const items = fake.requests.map((x) => (x.body as { items: { transactionId: string; payload: unknown; partition: string }[] }).items);
  t.deepEqual(
    items.map((b) => b.map((i) => i.transactionId)),
    [['a', 'b'], ['c']],
  );
  t.deepEqual(items.flat()[2], { queue: 'orders', partition: 'p1', transactionId: 'c', payload: { n: 3 } });
});

test('push from lines: -o json is one object a line, -o name message/ID; --raw; -f - is the same as -; all good exits 0', async (t) => {
  const { fake, env } = await pushApi(t);
  const json = await queenctlIn(['push', 'orders', '-f', '-', '--raw', '-o', 'json'], { env, stdin: source(['plain text', 'more']) });
  t.is(json.code, 0, json.err);
  const objs = json.out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { line: number; status: string; offset: number });
  t.like(objs, [
    { line: 1, status: 'queued', offset: 0 },
    { line: 2, status: 'queued', offset: 1 },
  ]);
  t.deepEqual(
    (fake.requests[0]!.body as { items: { payload: unknown }[] }).items.map((i) => i.payload),
    ['plain text', 'more'],
  );
  const names = await queenctlIn(['push', 'orders', '-', '-o', 'name'], { env, stdin: '1\n2\n' });
  t.deepEqual(names, { code: 0, out: 'message/m2\nmessage/m3\n', err: 'pushed 2 lines: 2 queued, 0 duplicate, 0 failed, 0 invalid\n' });
  const bad = await queenctlIn(['push', 'orders', '-', '-o', 'name'], { env, stdin: 'oops\n' });
  t.is(bad.code, 1);
  t.is(bad.out, '');
  t.regex(bad.err, /line 1: invalid: must be JSON/, 'a failed line is still reported, on stderr');
});

test('push: one DATA or lines, not both; --txn is for one message, -K and --batch for lines', async (t) => {
  const { fake, env } = await pushApi(t);
  for (const args of [
    ['push', 'q', '-', 'extra'],
    ['push', 'q', '-f', '-', '{}'],
    ['push', 'q', '-', '--txn', 'x'],
    ['push', 'q', '{}', '-K', ':'],
    ['push', 'q', '{}', '--batch', '5'],
    ['push', 'q', '-', '--batch', '0'],
    ['push', 'q', '-', '-K', ''],
    ['push', 'q', 'not-json'],
    ['push', 'q'],
  ]) {
    t.is((await queenctlIn(args, { env, stdin: '1\n' })).code, 2, args.join(' '));
  }
  t.is(fake.requests.length, 0);
  const one = await queenctlIn(['push', 'q', '--raw', 'hello', '-o', 'name'], { env });
  t.deepEqual(one, { code: 0, out: 'message/m0\n', err: '' });
  t.is((fake.requests[0]!.body as { items: { payload: unknown }[] }).items[0]!.payload, 'hello');
});
