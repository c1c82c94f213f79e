import anyTest, { type TestFn } from 'ava';
import type pg from 'pg';
import { Queen, QueenHttpError } from '../../src/client/index.js';
import type { HttpApi } from '../../src/http/server.js';
import { type HttpStack, startHttpStack, storedFrames } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * Client mistakes get the documented 4xx (docs/http-api.md), never a 5xx,
 * never a crash; per-item mistakes fail only their item. Afterwards the
 * service is alive and the data accepted before is intact.
 *
 * Two APIs over one push path: `open` without a token, `guarded` with one.
 */

const TOKEN = 'sekret-token-42';
const MAX_BODY = 64 * 1024;
const MAX_PAYLOAD = 1024;
const MAX_ITEMS = 50;

interface Ctx {
  stack: HttpStack;
  sql: pg.Pool;
  open: HttpApi;
  guarded: HttpApi;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const stack = await startHttpStack('http_bad', { maxPayloadBytes: MAX_PAYLOAD, maxBodyBytes: MAX_BODY, maxItemsPerPush: MAX_ITEMS });
  const guarded = await stack.addApi({ authToken: TOKEN });
  t.context = { stack, sql: stack.sql, open: stack.api, guarded };
});

teardownAndCheckLeaks(test, async (t) => {
  await t.context.stack?.stop();
});

function frames(t: { context: Ctx }, queue: string): Promise<number> {
  return storedFrames(t.context.sql, queue);
}

interface Raw {
  method?: string;
  path: string;
  body?: string;
  contentType?: string | null;
  auth?: string;
}

async function send(base: string, r: Raw): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = {};
  if (r.contentType !== null) headers['content-type'] = r.contentType ?? 'application/json';
  if (r.auth) headers.authorization = r.auth;
  const res = await fetch(`${base}${r.path}`, { method: r.method ?? (r.body === undefined ? 'GET' : 'POST'), headers, body: r.body });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON; keep the text
  }
  return { status: res.status, body, headers: res.headers };
}

const item = (over: Record<string, unknown> = {}) => ({ queue: 'bad-in', partition: 'p', payload: { ok: true }, ...over });
const pushBody = (items: unknown) => JSON.stringify({ items });

/** Whole-request mistakes: [name, request, status, error code, message pattern]. */
const REQUEST_CASES: [string, Raw, number, string, RegExp][] = [
  ['malformed JSON', { path: '/api/v1/push', body: '{"items": [' }, 400, 'bad_request', /^malformed JSON: /],
  ['trailing garbage after JSON', { path: '/api/v1/push', body: '{"items": []} x' }, 400, 'bad_request', /malformed JSON/],
  ['empty body with a JSON content type', { path: '/api/v1/push', body: '' }, 400, 'bad_request', /body is empty/],
  ['body is an array', { path: '/api/v1/push', body: '[]' }, 400, 'bad_request', /JSON object/],
  ['body is a string', { path: '/api/v1/push', body: '"items"' }, 400, 'bad_request', /JSON object/],
  ['body is null', { path: '/api/v1/push', body: 'null' }, 400, 'bad_request', /JSON object/],
  ['items missing', { path: '/api/v1/push', body: '{}' }, 400, 'bad_request', /items must be an array/],
  ['items is an object', { path: '/api/v1/push', body: '{"items": {"queue": "q"}}' }, 400, 'bad_request', /items must be an array/],
  ['items is empty', { path: '/api/v1/push', body: pushBody([]) }, 400, 'bad_request', /must not be empty/],
  [
    'too many items',
    { path: '/api/v1/push', body: pushBody(Array.from({ length: MAX_ITEMS + 1 }, () => item())) },
    400,
    'bad_request',
    /over the limit of 50 per request/,
  ],
  [
    'unknown top-level field',
    { path: '/api/v1/push', body: JSON.stringify({ items: [item()], queue: 'x' }) },
    400,
    'bad_request',
    /unknown field "queue"/,
  ],
  [
    '__proto__ smuggled in',
    { path: '/api/v1/push', body: '{"__proto__": {"items": [1]}, "items": [{"queue":"bad-in","payload":1}]}' },
    400,
    'bad_request',
    /unknown field "__proto__"/,
  ],
  [
    'body over maxBodyBytes',
    { path: '/api/v1/push', body: pushBody([item({ payload: 'x'.repeat(MAX_BODY) })]) },
    413,
    'payload_too_large',
    /too large/,
  ],
  [
    'text/plain content type',
    { path: '/api/v1/push', body: pushBody([item()]), contentType: 'text/plain' },
    415,
    'unsupported_media_type',
    /Unsupported Media Type/,
  ],
  [
    'form content type',
    { path: '/api/v1/push', body: 'items=1', contentType: 'application/x-www-form-urlencoded' },
    415,
    'unsupported_media_type',
    /Unsupported Media Type/,
  ],
  [
    'a body without a content type',
    { path: '/api/v1/push', body: pushBody([item()]), contentType: null },
    415,
    'unsupported_media_type',
    /Unsupported Media Type/,
  ],
  ['push without a body', { method: 'POST', path: '/api/v1/push', contentType: null }, 400, 'bad_request', /JSON object/],
  ['configure: body is an array', { path: '/api/v1/configure', body: '[1]' }, 400, 'bad_request', /JSON object/],
  [
    'configure: unknown field',
    { path: '/api/v1/configure', body: '{"queue":"cfg-bad","option":{}}' },
    400,
    'bad_request',
    /unknown field "option"/,
  ],
  [
    'configure: bad queue name',
    { path: '/api/v1/configure', body: '{"queue":"no spaces","options":{}}' },
    400,
    'bad_request',
    /queue must be/,
  ],
  ['configure: missing queue', { path: '/api/v1/configure', body: '{"options":{}}' }, 400, 'bad_request', /queue must be/],
  [
    'configure: bad mode',
    { path: '/api/v1/configure', body: '{"queue":"cfg-bad","options":{},"mode":"upsert"}' },
    400,
    'bad_request',
    /mode must be "merge" or "replace"/,
  ],
  [
    'configure: unknown option',
    { path: '/api/v1/configure', body: '{"queue":"cfg-bad","options":{"dedupWindow":5}}' },
    400,
    'bad_request',
    /unknown option "dedupWindow"/,
  ],
  [
    'configure: wrong type',
    { path: '/api/v1/configure', body: '{"queue":"cfg-bad","options":{"dedupWindowSeconds":"60"}}' },
    400,
    'bad_request',
    /dedupWindowSeconds must be an integer/,
  ],
  [
    'configure: negative window',
    { path: '/api/v1/configure', body: '{"queue":"cfg-bad","options":{"dedupWindowSeconds":-1}}' },
    400,
    'bad_request',
    /dedupWindowSeconds/,
  ],
  [
    'configure: options not an object',
    { path: '/api/v1/configure', body: '{"queue":"cfg-bad","options":[]}' },
    400,
    'bad_request',
    /options must be an object/,
  ],
  ['get: unknown queue', { path: '/api/v1/resources/queues/never-made' }, 404, 'not_found', /does not exist/],
  ['get: bad queue name', { path: `/api/v1/resources/queues/${encodeURIComponent('a b')}` }, 400, 'bad_request', /queue must be/],
  ['unknown route', { path: '/api/v1/nope' }, 404, 'not_found', /no route GET \/api\/v1\/nope/],
  ['wrong method', { method: 'GET', path: '/api/v1/push' }, 404, 'not_found', /no route/],
];

test.serial('seed data before the bad input', async (t) => {
  const res = await new Queen({ url: t.context.open.url })
    .queue('bad-in')
    .partition('p')
    .push([
      { transactionId: 'kept-1', data: 1 },
      { transactionId: 'kept-2', data: 2 },
    ]);
  t.deepEqual(
    res.map((r) => r.status),
    ['queued', 'queued'],
  );
  t.is(await frames(t, 'bad-in'), 2);
});

for (const [name, req, status, code, message] of REQUEST_CASES) {
  test.serial(`bad request: ${name} -> ${status} ${code}`, async (t) => {
    const res = await send(t.context.open.url, req);
    t.is(res.status, status, JSON.stringify(res.body));
    t.is(res.body.error, code);
    t.regex(res.body.message, message);
    t.false(res.body.retriable);
  });
}

test.serial('configure errors name the offending key in "field"', async (t) => {
  const cases: [string, string][] = [
    ['{"queue":"cfg-bad","options":{"dedupWindow":5}}', 'options.dedupWindow'],
    ['{"queue":"cfg-bad","options":{"dedupWindowSeconds":1.5}}', 'options.dedupWindowSeconds'],
    ['{"queue":"cfg-bad","mode":"nope"}', 'mode'],
  ];
  for (const [body, field] of cases) {
    const res = await send(t.context.open.url, { path: '/api/v1/configure', body });
    t.is(res.status, 400);
    t.is(res.body.field, field);
  }
  const missing = await send(t.context.open.url, { path: '/api/v1/resources/queues/cfg-bad' });
  t.is(missing.status, 404, 'no failed configure created the queue');
});

test.serial('bad items fail alone; the valid items of the same request are written', async (t) => {
  const items: unknown[] = [
    item({ transactionId: 'good-1' }),
    42,
    null,
    [item()],
    'item',
    item({ queue: 'bad queue!' }),
    { partition: 'p', payload: 1 },
    item({ partition: 'x'.repeat(300) }),
    item({ partition: '' }),
    item({ partition: 'p\u0001' }),
    item({ transactionId: 7 }),
    item({ transactionId: 'y'.repeat(600) }),
    { queue: 'bad-in', partition: 'p' },
    item({ data: 1 }),
    item({ payload: 'z'.repeat(MAX_PAYLOAD) }),
    item({ transactionID: 'typo' }),
    item({ traceContext: 12 }),
    { queue: 'bad-in', partition: 'p', transactionId: 'good-2', data: [1, 2, 3] },
  ];
  const res = await send(t.context.open.url, { path: '/api/v1/push', body: pushBody(items) });
  t.is(res.status, 201);
  const out = res.body as { index: number; status: string; error?: string; message_id: string | null }[];
  t.deepEqual(
    out.map((r) => r.index),
    items.map((_, i) => i),
  );
  const expected = ['queued', ...Array(16).fill('failed'), 'queued'];
  t.deepEqual(
    out.map((r) => r.status),
    expected,
  );
  const errors = out.map((r) => r.error ?? '');
  const patterns = [
    /^$/,
    /object/,
    /object/,
    /object/,
    /object/,
    /queue must be/,
    /queue must be/,
    /at most 256/,
    /non-empty/,
    /control/,
    /transactionId must be a non-empty string/,
    /at most 512/,
    /payload is required/,
    /either payload or data/,
    /over the limit of 1024/,
    /unknown field "transactionID"/,
    /traceContext must be a string/,
    /^$/,
  ];
  patterns.forEach((p, i) => t.regex(errors[i]!, p, `item ${i}`));
  for (const r of out.filter((x) => x.status === 'failed')) t.is(r.message_id, null);
  t.is(await frames(t, 'bad-in'), 4);
});

test.serial('names a URL path cannot carry: queues "." and ".." are refused, a partition ".." is written and read back', async (t) => {
  const base = t.context.open.url;
  const res = await send(base, {
    path: '/api/v1/push',
    body: pushBody([
      { queue: '.', partition: 'p', transactionId: 'dot-1', data: 1 },
      { queue: '..', partition: 'p', transactionId: 'dot-2', data: 2 },
      { queue: 'dots', partition: '..', transactionId: 'dot-3', data: 3 },
      { queue: 'dots', partition: '.', transactionId: 'dot-4', data: 4 },
    ]),
  });
  t.is(res.status, 201);
  const out = res.body as { status: string; error?: string }[];
  t.deepEqual(
    out.map((r) => r.status),
    ['failed', 'failed', 'queued', 'queued'],
  );
  for (const r of out.slice(0, 2)) t.regex(r.error!, /queue must be .* and not "\." or "\.\."/);
  t.is(await storedFrames(t.context.sql, '.'), 0);
  // The client sends such a partition as ?partition=, which a URL parser leaves alone.
  const client = new Queen({ url: base });
  for (const [partition, txn] of [
    ['..', 'dot-3'],
    ['.', 'dot-4'],
  ] as const) {
    const got = await client.queue('dots').pop({ group: 'g', partition, batch: 10 });
    t.deepEqual(
      got.map((m) => [m.partition, m.transactionId]),
      [[partition, txn]],
    );
  }
  const twice = await send(base, { path: '/api/v1/pop/queue/dots/partition/p?partition=p' });
  t.is(twice.status, 400);
  t.is(twice.body.field, 'partition');
  const timer = await send(base, { path: '/api/v1/timers', body: JSON.stringify({ queue: 'dots', key: '..', delayMs: 1000, payload: 1 }) });
  t.is(timer.status, 400);
  t.is(timer.body.field, 'key');
});

test.serial('auth: /api routes need the bearer token; /health and /metrics do not', async (t) => {
  const base = t.context.guarded.url;
  const body = pushBody([item({ transactionId: 'authed' })]);
  const none = await send(base, { path: '/api/v1/push', body });
  t.is(none.status, 401);
  t.is(none.body.error, 'unauthorized');
  t.regex(none.headers.get('www-authenticate')!, /^Bearer/);
  t.is((await send(base, { path: '/api/v1/push', body, auth: 'Bearer wrong' })).status, 401);
  t.is((await send(base, { path: '/api/v1/push', body, auth: `Bearer ${TOKEN}x` })).status, 401);
  t.is((await send(base, { path: '/api/v1/push', body, auth: `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}` })).status, 401);
  t.is((await send(base, { path: '/api/v1/push', body: '{"items": [', auth: 'Bearer nope' })).status, 401, 'auth comes before parsing');
  t.is((await send(base, { path: '/api/v1/configure', body: '{"queue":"sneaky"}' })).status, 401);
  t.is((await send(base, { path: '/api/v1/resources/queues/bad-in' })).status, 401);
  // The router decodes %61 to "a": the token hook is bound to the routes, not to a path prefix, so this is still refused.
  t.is((await send(base, { path: '/%61pi/v1/resources/queues/bad-in' })).status, 401);
  t.is(await frames(t, 'sneaky'), 0);

  const ok = await send(base, { path: '/api/v1/push', body, auth: `Bearer ${TOKEN}` });
  t.is(ok.status, 201);
  t.is(ok.body[0].status, 'queued');
  t.is(
    (await send(base, { path: '/api/v1/resources/queues/bad-in', auth: `bearer ${TOKEN}` })).status,
    200,
    'the scheme is case-insensitive',
  );
  t.is((await send(base, { path: '/health' })).status, 200);
  t.is((await send(base, { path: '/metrics' })).status, 200);
});

test.serial('auth through the client: the token is sent; a wrong one is a 401 that is not retried', async (t) => {
  const good = new Queen({ url: t.context.guarded.url, token: TOKEN });
  const [r] = await good
    .queue('bad-in')
    .partition('p')
    .push([{ transactionId: 'client-authed', data: 1 }]);
  t.is(r!.status, 'queued');
  let retries = 0;
  const bad = new Queen({ url: t.context.guarded.url, token: 'nope', onRetry: () => retries++ });
  const err = await t.throwsAsync(bad.queue('bad-in').get(), { instanceOf: QueenHttpError });
  t.is(err.status, 401);
  t.is(retries, 0);
});

test.serial('afterwards the service is alive and the accepted data is intact', async (t) => {
  const health = await send(t.context.open.url, { path: '/health' });
  t.is(health.status, 200);
  t.deepEqual(health.body, { status: 'ok' });
  // 2 seeded + 2 good items + 1 authed push + 1 client push; none of the bad input wrote anything.
  t.is(await frames(t, 'bad-in'), 6);
  const again = await new Queen({ url: t.context.open.url })
    .queue('bad-in')
    .partition('p')
    .push([{ transactionId: 'kept-1', data: 1 }]);
  t.is(again[0]!.status, 'duplicate', 'the seeded message is still there to be a duplicate of');
  const metrics = await send(t.context.open.url, { path: '/metrics' });
  t.notRegex(metrics.body, /queen_http_responses_total\{status="5\d\d"\}/, 'no 5xx was ever answered');
});
