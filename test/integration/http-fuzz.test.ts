import http from 'node:http';
import anyTest, { type TestFn } from 'ava';
import fc from 'fast-check';
import type { InjectOptions } from 'fastify';
import { isWellFormedUnicode } from '../../src/engine/limits.js';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * Property-based fuzzing of the whole HTTP API (issue 13): fast-check makes
 * methods, paths, headers and bodies (valid and broken JSON, invalid UTF-8,
 * lone surrogates, huge nesting, wrong types everywhere) and each one goes
 * through the real server (fastify inject: hooks, parser, routes, error
 * handler, fusion, LogWriter) into real PostgreSQL. Properties, per request:
 * never a 5xx; every error in the documented shape; a push answers one
 * result per item and never accepts an identity with a lone surrogate.
 * Afterwards the service is ready and every message stored before the fuzzing
 * is byte-for-byte unchanged (read back with SQL).
 */

const RUNS = Number(process.env.QUEEN_FUZZ_RUNS ?? 10_000);
const MAX_BODY = 256 * 1024;
const SEED_QUEUE = 'fz-seeded';

const test = anyTest as TestFn<HttpStack>;

test.before(async (t) => {
  t.context = await startHttpStack('http_fuzz', { maxBodyBytes: MAX_BODY, maxPayloadBytes: 64 * 1024, maxItemsPerPush: 20, holdMs: 0 });
});

teardownAndCheckLeaks(test, async (t) => {
  await t.context.stop?.();
});

// ---- strings that stress identities -------------------------------------

/** Any UTF-16 code units, lone surrogates included. */
const codeUnits = fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 12 }).map((a) => String.fromCharCode(...a));
const loneSurrogate = fc
  .tuple(fc.string({ maxLength: 4 }), fc.integer({ min: 0xd800, max: 0xdfff }), fc.string({ maxLength: 4 }))
  .map(([a, s, b]) => `${a}${String.fromCharCode(s)}${b}`);
const edgy = fc.constantFrom(
  '\ufffd',
  '\ud83d\ude00',
  '\u0000',
  '\u001f',
  '\u007f',
  '\u2028',
  '\ufeff',
  'é',
  '',
  ' ',
  '__proto__',
  'constructor',
);
const identity = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('a', 'b', 'Default', 'p-1') },
  { weight: 2, arbitrary: fc.string({ maxLength: 20 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 2, arbitrary: codeUnits },
  { weight: 2, arbitrary: loneSurrogate },
  { weight: 1, arbitrary: edgy },
  { weight: 1, arbitrary: fc.integer({ min: 250, max: 600 }).map((n) => 'é'.repeat(n >> 1)) },
);
const queueName = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('fz-a', 'fz-b', SEED_QUEUE) },
  { weight: 1, arbitrary: fc.integer({ min: 100, max: 130 }).map((n) => 'q'.repeat(n)) },
  { weight: 2, arbitrary: identity },
);
const wrongType = fc.oneof(
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 2 }),
  fc.object({ maxDepth: 1 }),
);

// ---- nesting ------------------------------------------------------------

/** A JSON value nested `depth` deep (as text, so a depth of 10^5 costs nothing to build). */
const deepText = fc
  .tuple(fc.oneof(fc.integer({ min: 1, max: 200 }), fc.integer({ min: 10_000, max: 60_000 })), fc.boolean())
  .map(([depth, arrays]) => (arrays ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`));

// ---- bodies ----------------------------------------------------------------

const item = fc.record(
  {
    queue: fc.oneof({ weight: 8, arbitrary: queueName }, { weight: 1, arbitrary: wrongType }),
    partition: fc.oneof({ weight: 8, arbitrary: identity }, { weight: 1, arbitrary: wrongType }),
    transactionId: fc.oneof({ weight: 8, arbitrary: identity }, { weight: 1, arbitrary: wrongType }),
    payload: fc.jsonValue({ maxDepth: 3 }),
    data: fc.jsonValue({ maxDepth: 1 }),
    traceContext: fc.oneof(fc.string({ maxLength: 60 }), loneSurrogate, wrongType),
    transactionID: fc.string({ maxLength: 5 }),
  },
  { requiredKeys: [] },
);
/** A push item whose payload is nested deep: spliced in as text. */
const deepItem = fc
  .tuple(queueName, identity, deepText)
  .map(([q, p, deep]) => `{"queue":${JSON.stringify(q)},"partition":${JSON.stringify(p)},"payload":${deep}}`);

const pushJson = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .array(fc.oneof({ weight: 6, arbitrary: item }, { weight: 1, arbitrary: wrongType }), { maxLength: 6 })
      .map((items) => JSON.stringify({ items })),
  },
  { weight: 1, arbitrary: fc.array(deepItem, { minLength: 1, maxLength: 2 }).map((items) => `{"items":[${items.join(',')}]}`) },
  {
    weight: 1,
    arbitrary: fc
      .record(
        { items: fc.oneof(wrongType, fc.array(item, { minLength: 21, maxLength: 25 })), extra: fc.jsonValue({ maxDepth: 1 }) },
        { requiredKeys: [] },
      )
      .map((b) => JSON.stringify(b)),
  },
);
const configureJson = fc.oneof(
  fc
    .record(
      {
        queue: queueName,
        options: fc.oneof(
          fc.record(
            {
              dedupWindowSeconds: fc.oneof(
                fc.integer({ min: -5, max: 3_000_000 }),
                fc.constant(null),
                fc.double(),
                wrongType,
                fc.string({ maxLength: 3 }),
              ),
            },
            { requiredKeys: [] },
          ),
          wrongType,
          fc.dictionary(identity, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 }),
        ),
        mode: fc.oneof(fc.constantFrom('merge', 'replace', 'REPLACE', null), wrongType, loneSurrogate),
        other: fc.jsonValue({ maxDepth: 1 }),
      },
      { requiredKeys: [] },
    )
    .map((b) => JSON.stringify(b)),
  fc
    .tuple(queueName, deepText)
    .map(([q, deep]) => `{"queue":${JSON.stringify(q)},"options":{"dedupWindowSeconds":${deep}},"mode":${deep}}`),
);
const brokenText = fc.oneof(
  pushJson.chain((s) => fc.integer({ min: 0, max: Math.max(0, s.length - 1) }).map((n) => s.slice(0, n))),
  fc.string({ unit: 'binary', maxLength: 40 }),
  deepText,
  fc.constantFrom('', ' ', 'null', '[]', '"x"', '{"items":[', '{"__proto__":{"items":[1]},"items":[]}', '\ufeff{"items":[]}'),
);
const body: fc.Arbitrary<string | Buffer | undefined> = fc.oneof(
  { weight: 10, arbitrary: pushJson },
  { weight: 3, arbitrary: configureJson },
  { weight: 3, arbitrary: brokenText },
  // Invalid UTF-8 inside an otherwise valid push (a lone surrogate's bytes, stray continuation bytes, overlongs).
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.uint8Array({ minLength: 1, maxLength: 6 }), fc.constantFrom('partition', 'transactionId', 'queue'))
      .map(([bytes, field]) =>
        Buffer.concat([Buffer.from(`{"items":[{"queue":"fz-a","${field}":"x`), Buffer.from(bytes), Buffer.from('","payload":1}]}')]),
      ),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)) },
  { weight: 1, arbitrary: fc.constant(undefined) },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: MAX_BODY - 64, max: MAX_BODY + 64 })
      .map((n) => `{"items":[{"queue":"fz-a","payload":"${'x'.repeat(n)}"}]}`),
  },
);

// ---- paths, methods, headers ------------------------------------------------

const printable = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 30 });
const percent = fc
  .array(fc.integer({ min: 0, max: 255 }), { maxLength: 8 })
  .map((a) => a.map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join(''));
const path = fc.oneof(
  { weight: 10, arbitrary: fc.constant('/api/v1/push') },
  { weight: 3, arbitrary: fc.constant('/api/v1/configure') },
  {
    weight: 3,
    arbitrary: fc
      .oneof(queueName, identity)
      .map((q) => `/api/v1/resources/queues/${encodeURIComponent(typeof q === 'string' && isWellFormedUnicode(q) ? q : 'x')}`),
  },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        printable,
        percent,
        fc.integer({ min: 90, max: 3000 }).map((n) => 'x'.repeat(n)),
      )
      .map((s) => `/api/v1/resources/queues/${s}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '/health',
      '/metrics',
      '/',
      '/api',
      '/api/v1/push/',
      '//api/v1/push',
      '/API/V1/PUSH',
      '/api/v1/push?x=1&x=2',
      '/%61pi/v1/push',
      '/api/v1/resources/queues/',
      '/api/v1/resources/queues/%',
    ),
  },
  { weight: 1, arbitrary: fc.tuple(printable, percent).map(([a, b]) => `/${a}${b}`) },
);
const method = fc.oneof(
  { weight: 8, arbitrary: fc.constant('POST') },
  { weight: 3, arbitrary: fc.constant('GET') },
  { weight: 1, arbitrary: fc.constantFrom('PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD') },
);
const headerValue = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 40 });
const headers = fc.record(
  {
    'content-type': fc.oneof(
      { weight: 10, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON') },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          'text/plain',
          'application/x-www-form-urlencoded',
          'application/json; charset=latin1',
          'multipart/form-data; boundary=x',
          '',
        ),
      },
      { weight: 1, arbitrary: headerValue },
    ),
    authorization: fc.oneof(fc.constant('Bearer x'), headerValue),
    'content-encoding': fc.constantFrom('gzip', 'identity', 'br'),
    'x-fuzz': headerValue,
    'transfer-encoding': fc.constant('chunked'),
  },
  { requiredKeys: [] },
);

/** Mostly a push a client could plausibly send, so the write path is fuzzed as much as the error paths. */
const jsonHeaders = fc
  .record({ 'content-type': fc.constantFrom('application/json', 'application/json; charset=utf-8') })
  .chain((h) =>
    fc
      .option(fc.record({ authorization: headerValue, 'x-fuzz': headerValue }, { requiredKeys: [] }), { nil: undefined })
      .map((extra) => ({ ...h, ...extra })),
  );
const request = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ method: fc.constant('POST'), path: fc.constant('/api/v1/push'), headers: jsonHeaders, body: pushJson }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      method: fc.constant('POST'),
      path: fc.constant('/api/v1/configure'),
      headers: jsonHeaders,
      body: configureJson,
    }),
  },
  { weight: 4, arbitrary: fc.record({ method, path, headers, body }) },
);

// ---- checks ------------------------------------------------------------------

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
const ERROR_KEYS = new Set(['error', 'message', 'field', 'retriable']);

function problems(
  req: { method: string; path: string },
  status: number,
  text: string,
  contentType: string | undefined,
  sent: unknown,
): string[] {
  const out: string[] = [];
  if (status >= 500) out.push(`status ${status}`);
  if (req.method === 'HEAD' || req.path.startsWith('/metrics')) return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [...out, `not JSON (${contentType}): ${text.slice(0, 100)}`];
  }
  if (status >= 400) {
    const b = parsed as Record<string, unknown>;
    if (b === null || typeof b !== 'object' || Array.isArray(b)) return [...out, 'error body not an object'];
    for (const k of Object.keys(b)) if (!ERROR_KEYS.has(k)) out.push(`error body has "${k}"`);
    if (typeof b.error !== 'string' || typeof b.message !== 'string' || typeof b.retriable !== 'boolean')
      out.push(`error body shape: ${text.slice(0, 200)}`);
  }
  if (status === 201) {
    const results = parsed as { index: number; status: string; transaction_id: string | null; partition: string }[];
    const items = (sent as { items?: unknown[] } | undefined)?.items;
    if (!Array.isArray(results) || !Array.isArray(items) || results.length !== items.length)
      return [...out, 'push answer does not have one result per item'];
    results.forEach((r, i) => {
      if (r.index !== i) out.push(`result ${i} has index ${r.index}`);
      if (r.status === 'failed') return;
      const it = items[i] as Record<string, unknown>;
      for (const f of ['queue', 'partition', 'transactionId']) {
        const v = it[f];
        if (typeof v === 'string' && !isWellFormedUnicode(v)) out.push(`item ${i}: ${f} with a lone surrogate was ${r.status}`);
      }
    });
  }
  return out;
}

interface Answer {
  statusCode: number;
  body: string;
  headers: Record<string, unknown>;
}

/**
 * fastify inject, or, for the few paths its URL parser refuses before the
 * server sees them ("/\\", "//x": WHATWG reads them as authority), the same
 * request over a real socket, where the path travels as the client wrote it.
 */
async function injectOrSend(stack: HttpStack, opts: InjectOptions): Promise<Answer> {
  try {
    const r = await stack.api.inject(opts);
    return { statusCode: r.statusCode, body: r.body, headers: r.headers };
  } catch (err) {
    if (!(err instanceof TypeError) || !err.message.includes('Invalid URL')) throw err;
  }
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: stack.api.port,
        method: opts.method as string,
        path: opts.url as string,
        headers: opts.headers as http.OutgoingHttpHeaders,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ statusCode: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), headers: res.headers }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.payload as string | Buffer | undefined);
  });
}

/** Every stored segment and txn row of the seeded queue, as bytes. */
async function seededRows(t: { context: HttpStack }): Promise<Map<string, string>> {
  const r = await t.context.sql.query(
    `SELECT s.partition_id, s.base_offset, s.end_offset, encode(s.blob, 'hex') AS blob, encode(x.hashes, 'hex') AS hashes
       FROM queen.log_segments s
       JOIN queen.log_txns x ON x.partition_id = s.partition_id AND x.base_offset = s.base_offset
       JOIN queen.log_partitions lp ON lp.id = s.partition_id JOIN queen.queues q ON q.id = lp.queue_id
      WHERE q.name = $1`,
    [SEED_QUEUE],
  );
  return new Map(r.rows.map((row) => [`${row.partition_id}/${row.base_offset}`, `${row.end_offset}:${row.blob}:${row.hashes}`]));
}

test('fuzzed requests: no 5xx, documented error shape, no lone-surrogate identity accepted; stored data unchanged and the service ready', async (t) => {
  const client = t.context.client;
  for (const p of ['a', 'b', '\ud83d\ude00', '\ufffd', 'Default']) {
    const res = await client
      .queue(SEED_QUEUE)
      .partition(p)
      .push(Array.from({ length: 5 }, (_, i) => ({ transactionId: `seed-${i}`, data: { p, i, deep: [[[[i]]]] } })));
    t.deepEqual(
      res.map((r) => r.status),
      Array(5).fill('queued'),
    );
  }
  const before = await seededRows(t);
  t.is(before.size, 5);

  const statuses = new Map<number, number>();
  let cases = 0;
  await fc.assert(
    fc.asyncProperty(request, async (req) => {
      cases++;
      const opts: InjectOptions = { method: req.method, url: req.path, headers: req.headers };
      if (req.body !== undefined) opts.payload = req.body;
      const res = await injectOrSend(t.context, opts);
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      let sent: unknown;
      if (req.body !== undefined) {
        try {
          sent = JSON.parse(typeof req.body === 'string' ? req.body : strictUtf8.decode(req.body));
        } catch {
          // not (UTF-8) JSON: nothing to compare results with
        }
      }
      const found = problems(req, res.statusCode, res.body, res.headers['content-type'] as string | undefined, sent);
      if (found.length > 0)
        throw new Error(`${req.method} ${req.path} -> ${res.statusCode}: ${found.join('; ')}\n${res.body.slice(0, 300)}`);
    }),
    // A fixed seed by default, so `make test` is reproducible; it is the one
    // that found the double response after "Connection: close" (a router
    // error answered, then a body parse error answered again). Set
    // QUEEN_FUZZ_SEED to explore others; a failing run prints its seed.
    { numRuns: RUNS, seed: Number(process.env.QUEEN_FUZZ_SEED ?? 511213126) },
  );
  t.is(cases, RUNS);
  t.log(`statuses: ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
  // The fuzzing reached the push path for real, not only the error paths.
  t.true((statuses.get(201) ?? 0) > RUNS / 10, 'a good share of requests were accepted pushes');
  t.true((statuses.get(400) ?? 0) > RUNS / 10, 'a good share of requests were refused');

  const health = await t.context.api.inject({ method: 'GET', url: '/health' });
  t.is(health.statusCode, 200, 'still ready');
  const after = await seededRows(t);
  for (const [k, v] of before) t.is(after.get(k), v, `seeded segment ${k} unchanged`);
  // And the seeded messages still deduplicate against what was stored before.
  const again = await client
    .queue(SEED_QUEUE)
    .partition('a')
    .push([{ transactionId: 'seed-0', data: 'again' }]);
  t.true(['duplicate', 'queued'].includes(again[0]!.status));
  const window = await t.context.sql.query('SELECT dedup_window_seconds FROM queen.queues WHERE name = $1', [SEED_QUEUE]);
  if (window.rows[0].dedup_window_seconds > 0)
    t.is(again[0]!.status, 'duplicate', 'fuzzed configure may change the window; while it is on, the seed is a duplicate');
});
