import net from 'node:net';
import anyTest, { type TestFn } from 'ava';
import { Queen, QueenHttpError } from '../../src/client/index.js';
import { run } from '../../src/cli/run.js';
import type { CliIo } from '../../src/cli/io.js';
import { mapRecord } from '../../src/ingress/recordMapping.js';
import { type HttpStack, startHttpStack, storedFrames } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * Issue 13, HTTP input: identities must be well-formed Unicode (a lone
 * surrogate is refused per item, never rewritten to U+FFFD), one client's bad
 * item never fails another client's items, every documented limit is
 * reachable through every route and the CLI, framework errors come out in the
 * documented error shape, and "mode": null is a 400.
 */

const test = anyTest as TestFn<HttpStack>;

test.before(async (t) => {
  t.context = await startHttpStack('http_hardening');
});

teardownAndCheckLeaks(test, async (t) => {
  await t.context.stop?.();
});

interface Answer {
  status: number;
  body: any;
}

async function post(base: string, path: string, body: unknown): Promise<Answer> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function get(base: string, path: string): Promise<Answer> {
  const res = await fetch(`${base}${path}`);
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) };
}

/** The documented error body: exactly these keys, right types. */
function assertErrorShape(
  t: { true(v: boolean, m?: string): void; deepEqual(a: unknown, b: unknown, m?: string): void },
  body: any,
  code: string,
): void {
  t.deepEqual(
    Object.keys(body)
      .filter((k) => k !== 'field')
      .sort(),
    ['error', 'message', 'retriable'],
    JSON.stringify(body),
  );
  t.deepEqual(body.error, code, JSON.stringify(body));
  t.true(typeof body.message === 'string' && typeof body.retriable === 'boolean', JSON.stringify(body));
}

async function partitionNames(t: { context: HttpStack }, queue: string): Promise<string[]> {
  const r = await t.context.sql.query(
    'SELECT lp.name FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 ORDER BY lp.name',
    [queue],
  );
  return r.rows.map((x) => x.name as string);
}

function frames(t: { context: HttpStack }, queue: string): Promise<number> {
  return storedFrames(t.context.sql, queue);
}

test('5: lone surrogates in partition names fail alone; concurrent good requests sharing their bundles are untouched', async (t) => {
  const base = t.context.api.url;
  const valid = ['plain', 'pair-\ud83d\ude00', 'fffd-\ufffd', 'accents-é'];
  const lone = ['u-\ud800', 'u-\udc00', 'u-\udbff-x', 'x-\ude00\ud83d'];
  const good = Array.from({ length: 120 }, (_, i) => ({
    items: [
      { queue: 'rq1', partition: valid[i % valid.length], transactionId: `good-${i}-a`, payload: i },
      { queue: 'rq1', partition: `p${i % 7}`, transactionId: `good-${i}-b`, payload: i },
    ],
  }));
  const bad = Array.from({ length: 24 }, (_, i) => ({
    items: [
      { queue: 'rq1', partition: lone[i % lone.length], payload: 'poison' },
      { queue: 'rq1', partition: 'bad-neighbour', transactionId: `neighbour-${i}`, payload: i },
    ],
  }));
  // Interleaved and all at once, so bad and good items share fusion bundles.
  const sent: { bad: boolean; answer: Promise<Answer> }[] = [];
  good.forEach((g, i) => {
    if (i % 5 === 0) sent.push({ bad: true, answer: post(base, '/api/v1/push', bad[i / 5]!) });
    sent.push({ bad: false, answer: post(base, '/api/v1/push', g) });
  });
  const answers = await Promise.all(sent.map(async (s) => ({ bad: s.bad, ...(await s.answer) })));
  const goodAnswers = answers.filter((a) => !a.bad);
  const badAnswers = answers.filter((a) => a.bad);
  t.is(goodAnswers.length, good.length);
  t.is(badAnswers.length, bad.length);
  const goodHurt = goodAnswers.filter((a) => a.status !== 201 || a.body.some((r: any) => r.status !== 'queued'));
  t.deepEqual(goodHurt, [], 'no good request is affected by the bad ones');
  for (const a of badAnswers) {
    t.is(a.status, 201, JSON.stringify(a.body));
    if (a.status !== 201) continue;
    t.is(a.body[0].status, 'failed');
    t.regex(a.body[0].error, /partition must be well-formed Unicode/);
    t.is(a.body[1].status, 'queued', 'the valid item of the same request is written');
  }
  // Nothing was rewritten: no U+FFFD partition besides the one asked for, and the valid names stored exactly.
  const names = await partitionNames(t, 'rq1');
  t.deepEqual(
    names.filter((n) => n.includes('\ufffd')),
    ['fffd-\ufffd'],
  );
  for (const v of valid) t.true(names.includes(v), v);
  t.is(await frames(t, 'rq1'), good.length * 2 + bad.length);
  const health = await get(base, '/health');
  t.is(health.status, 200);
});

test('6: distinct transactionIds with lone surrogates are never merged; pairs and U+FFFD are ordinary ids', async (t) => {
  const p = new Queen({ url: t.context.api.url }).queue('ls').partition('one');
  const ids = ['ls-\ud800', 'ls-\udc00', 'ls-\ufffd', 'ls-\ud83d\ude00', 'ls-\ud83d', 'ls-\ude00'];
  const statuses: string[] = [];
  const errors: string[] = [];
  for (const id of ids) {
    const [r] = await p.push([{ transactionId: id, data: id }]);
    statuses.push(r!.status);
    errors.push(r!.error ?? '');
  }
  t.deepEqual(statuses, ['failed', 'failed', 'queued', 'queued', 'failed', 'failed']);
  for (const i of [0, 1, 4, 5]) t.regex(errors[i]!, /transactionId must be well-formed Unicode/);
  const [again] = await p.push([{ transactionId: 'ls-\ufffd', data: 'again' }]);
  t.is(again!.status, 'duplicate', 'U+FFFD itself is a real id and deduplicates');
  const [pairAgain] = await p.push([{ transactionId: 'ls-\ud83d\ude00', data: 'again' }]);
  t.is(pairAgain!.status, 'duplicate');
  t.is(await frames(t, 'ls'), 2);
  // traceContext is stored byte for byte too: refused, not rewritten.
  const [trace] = await p.push([{ transactionId: 'ls-trace', data: 1, traceContext: '00-\ud800' }]);
  t.is(trace!.status, 'failed');
  t.regex(trace!.error!, /traceContext must be well-formed Unicode/);
});

test('6: a Kafka header string with a lone surrogate is refused by the writer (dead-lettered), never merged', async (t) => {
  const rec = (txn: string, offset: string) => ({
    key: Buffer.from('k'),
    value: Buffer.from('{}'),
    offset,
    headers: { transactionId: txn },
  });
  const mapped = ['ls-\ud800', 'ls-\udc00', 'ls-ok'].map((txn, i) =>
    mapRecord('topic', 'kq', 0, rec(txn, String(i)), { missingId: 'dlq' }),
  );
  const items = mapped.map((m) => (m.ok ? m.item : undefined)).filter((x) => x !== undefined);
  const results = await t.context.writer.push(items);
  t.deepEqual(
    results.map((r) => r.status),
    ['failed', 'failed', 'queued'],
  );
  t.regex(results[0]!.error!, /well-formed/);
});

test('5: a body that is not valid UTF-8 is a 400, not a silent U+FFFD rewrite', async (t) => {
  const body = Buffer.concat([
    Buffer.from('{"items":[{"queue":"rq-bytes","partition":"a-'),
    Buffer.from([0xed, 0xa0, 0x80]),
    Buffer.from('","payload":1}]}'),
  ]);
  const res = await fetch(`${t.context.api.url}/api/v1/push`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  t.is(res.status, 400);
  const b = (await res.json()) as any;
  assertErrorShape(t, b, 'bad_request');
  t.regex(b.message, /not valid UTF-8/);
  t.deepEqual(await partitionNames(t, 'rq-bytes'), []);
});

test('7: queue names of 101-128 characters work through every route; longer ones get the documented errors', async (t) => {
  const base = t.context.api.url;
  const client = new Queen({ url: base });
  for (const len of [100, 101, 127, 128]) {
    const name = `q${'x'.repeat(len - 1)}`;
    const q = client.queue(name);
    t.like(await q.configure({ dedupWindowSeconds: 60 }), { created: true });
    const [r] = await q.partition('p'.repeat(256)).push([{ transactionId: 't'.repeat(512), data: len }]);
    t.is(r!.status, 'queued', `push at the limits (queue ${len}, partition 256 B, transactionId 512 B)`);
    t.like(await q.get(), { queue: name, options: { dedupWindowSeconds: 60 }, partitions: 1 });
  }
  const tooLong = await get(base, `/api/v1/resources/queues/${'x'.repeat(129)}`);
  t.is(tooLong.status, 400);
  assertErrorShape(t, tooLong.body, 'bad_request');
  t.regex(tooLong.body.message, /queue must be 1-128/);
  const wayTooLong = await get(base, `/api/v1/resources/queues/${'x'.repeat(5000)}`);
  t.is(wayTooLong.status, 414);
  assertErrorShape(t, wayTooLong.body, 'uri_too_long');
  const badEscape = await get(base, '/api/v1/resources/queues/%E0%A4%A');
  t.is(badEscape.status, 400);
  assertErrorShape(t, badEscape.body, 'bad_request');
  const err = await t.throwsAsync(client.queue('x'.repeat(129)).get(), { instanceOf: QueenHttpError });
  t.is(err.status, 400);
});

test('7: the CLI reaches the same limits', async (t) => {
  const out: string[] = [];
  const io: CliIo = {
    out: (s) => void out.push(s),
    err: (s) => void out.push(s),
    env: { QUEEN_URL: t.context.api.url },
    read: async () => '',
  };
  const name = `c${'y'.repeat(127)}`;
  t.is(await run(['push', name, '--partition', 'é'.repeat(128), '--txn', 't'.repeat(512), '{"a":1}'], io), 0, out.join(''));
  t.is(await run(['get', 'queue', name, '-o', 'json'], io), 0, out.join(''));
  t.like(JSON.parse(out.at(-1)!), { queue: name, partitions: 1 });
});

test('7: parser-level errors (oversized headers) come out in the documented error shape', async (t) => {
  const raw = await new Promise<string>((resolve, reject) => {
    const s = net.connect(t.context.api.port, '127.0.0.1');
    let data = '';
    s.on('data', (d) => (data += d.toString()));
    s.on('end', () => resolve(data));
    s.on('close', () => resolve(data));
    s.on('error', reject);
    s.write(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(40_000)}\r\n\r\n`);
  });
  t.regex(raw, /^HTTP\/1.1 431 /);
  assertErrorShape(t, JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)), 'headers_too_large');
});

test('a client that sends its request too slowly is cut off with 408 at the request timeout, not a sweep later', async (t) => {
  const api = await t.context.addApi({ requestTimeoutMs: 1_000 });
  const started = Date.now();
  const raw = await new Promise<string>((resolve, reject) => {
    const s = net.connect(api.port, '127.0.0.1');
    let data = '';
    s.on('data', (d) => (data += d.toString()));
    s.on('close', () => resolve(data));
    s.on('error', reject);
    // Headers complete, body promised and never sent.
    s.write('POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"items"');
  });
  t.regex(raw, /^HTTP\/1.1 408 /);
  // Node's default sweep (every 30 s) would cut it 1 to 31 s after the start;
  // ours sweeps every 100 ms here. The bound leaves wide slack for a loaded host.
  t.true(Date.now() - started < 20_000, `cut after ${Date.now() - started} ms`);
});

test('8: "mode": null on /configure is a 400 naming mode, and changes nothing', async (t) => {
  const base = t.context.api.url;
  t.is((await post(base, '/api/v1/configure', { queue: 'cfg-null-mode', options: { dedupWindowSeconds: 42 } })).status, 200);
  const res = await post(base, '/api/v1/configure', { queue: 'cfg-null-mode', options: { dedupWindowSeconds: 7 }, mode: null });
  t.is(res.status, 400);
  assertErrorShape(t, res.body, 'bad_request');
  t.is(res.body.field, 'mode');
  t.regex(res.body.message, /mode must be "merge" or "replace", got null/);
  t.like((await get(base, '/api/v1/resources/queues/cfg-null-mode')).body, { options: { dedupWindowSeconds: 42 } });
  const created = await post(base, '/api/v1/configure', { queue: 'cfg-null-mode-new', mode: null });
  t.is(created.status, 400);
  t.is((await get(base, '/api/v1/resources/queues/cfg-null-mode-new')).status, 404, 'a refused configure creates nothing');
});
