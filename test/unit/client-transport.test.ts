import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { Queen, QueenHttpError, QueenNetworkError } from '../../src/client/index.js';

/**
 * The client's retry policy against a real local HTTP server that answers
 * from a script: what is retried, what is not, and that a retried push
 * sends the same transactionIds every time.
 */

interface Scripted {
  url: string;
  bodies: unknown[];
  close(): Promise<void>;
}

async function scripted(answers: { status: number; body: unknown; headers?: Record<string, string> }[]): Promise<Scripted> {
  const bodies: unknown[] = [];
  let n = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined);
      const a = answers[Math.min(n++, answers.length - 1)]!;
      res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
      res.end(JSON.stringify(a.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    bodies,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const unavailable = {
  status: 503,
  body: { error: 'unavailable', message: 'PostgreSQL is unavailable', retriable: true },
  headers: { 'retry-after': '0' },
};
const pushed = (txn: string) => ({
  status: 201,
  body: [
    {
      index: 0,
      message_id: '0190a000-0000-7000-8000-000000000000',
      transaction_id: txn,
      queue: 'q',
      partition: 'p',
      status: 'queued',
      offset: 3,
    },
  ],
});

test('503 is retried, and every attempt carries the same minted transactionId', async (t) => {
  const s = await scripted([unavailable, unavailable, pushed('ignored')]);
  t.teardown(() => s.close());
  const retries: string[] = [];
  const client = new Queen({ url: s.url, baseDelayMs: 1, onRetry: (i) => retries.push(`${i.attempt}:${i.reason}`) });
  const [r] = await client
    .queue('q')
    .partition('p')
    .push([{ data: { a: 1 } }]);
  t.is(r!.status, 'queued');
  t.is(r!.offset, 3);
  t.deepEqual(retries, ['1:HTTP 503', '2:HTTP 503']);
  const txns = s.bodies.map((b) => (b as { items: { transactionId: string }[] }).items[0]!.transactionId);
  t.is(txns.length, 3);
  t.regex(txns[0]!, /^[0-9a-f-]{36}$/);
  t.deepEqual(new Set(txns).size, 1, 'the retry is deduplicable');
  t.deepEqual((s.bodies[0] as { items: unknown[] }).items[0], { queue: 'q', partition: 'p', transactionId: txns[0], payload: { a: 1 } });
});

test('a given transactionId is sent as is', async (t) => {
  const s = await scripted([pushed('mine')]);
  t.teardown(() => s.close());
  await new Queen({ url: s.url }).queue('q').push([{ transactionId: 'mine', data: null }]);
  t.deepEqual((s.bodies[0] as { items: unknown[] }).items[0], { queue: 'q', partition: 'Default', transactionId: 'mine', payload: null });
});

test('4xx is thrown at once as QueenHttpError with the server body', async (t) => {
  const s = await scripted([
    { status: 400, body: { error: 'bad_request', message: 'mode must be "merge" or "replace"', field: 'mode', retriable: false } },
  ]);
  t.teardown(() => s.close());
  const err = await t.throwsAsync(new Queen({ url: s.url, baseDelayMs: 1 }).queue('q').configure({}, { mode: 'merge' }), {
    instanceOf: QueenHttpError,
  });
  t.is(err.status, 400);
  t.is(err.code, 'bad_request');
  t.is(err.field, 'mode');
  t.regex(err.message, /HTTP 400: mode must be/);
  t.is(s.bodies.length, 1);
});

test('retries are bounded: the last 503 is thrown after retries + 1 attempts', async (t) => {
  const s = await scripted([unavailable]);
  t.teardown(() => s.close());
  const err = await t.throwsAsync(new Queen({ url: s.url, retries: 2, baseDelayMs: 1 }).queue('q').get(), { instanceOf: QueenHttpError });
  t.is(err.status, 503);
  t.is(s.bodies.length, 3);
});

test('network errors are retried, then thrown as QueenNetworkError', async (t) => {
  // A port that was just free: nothing listens there.
  const s = await scripted([unavailable]);
  const url = s.url;
  await s.close();
  let retries = 0;
  const err = await t.throwsAsync(new Queen({ url, retries: 3, baseDelayMs: 1, onRetry: () => retries++ }).queue('q').get(), {
    instanceOf: QueenNetworkError,
  });
  t.is(retries, 3);
  t.regex(err.message, /ECONNREFUSED.*after 4 attempts/);
});

test('backoff delays grow and stay within the ceiling; Retry-After is honoured up to it', async (t) => {
  const s = await scripted([{ ...unavailable, headers: { 'retry-after': '3600' } }, unavailable, unavailable, unavailable, pushed('x')]);
  t.teardown(() => s.close());
  const delays: number[] = [];
  await new Queen({ url: s.url, baseDelayMs: 1, maxDelayMs: 20, onRetry: (i) => delays.push(i.delayMs) }).queue('q').push([{ data: 1 }]);
  t.is(delays.length, 4);
  t.is(delays[0], 20, 'a long Retry-After is capped at maxDelayMs');
  delays.slice(1).forEach((d, i) => t.true(d >= 0 && d <= Math.min(20, 2 ** (i + 1)), `delay ${d}`));
});

test('a base URL with a path prefix is kept', async (t) => {
  const s = await scripted([
    { status: 200, body: { queue: 'q', options: { dedupWindowSeconds: 1 }, createdAt: '', updatedAt: '', partitions: 0 } },
  ]);
  t.teardown(() => s.close());
  const info = await new Queen({ url: `${s.url}/` }).queue('a.b-c_d').get();
  t.is(info.options.dedupWindowSeconds, 1);
});
