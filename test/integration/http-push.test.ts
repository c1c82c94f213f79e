import net from 'node:net';
import anyTest, { type TestFn } from 'ava';
import type pg from 'pg';
import { Queen, QueenHttpError } from '../../src/client/index.js';
import { HttpApi } from '../../src/http/server.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';

/**
 * The push path over real HTTP: the seed's observable example through the
 * client, the wire contract of POST /api/v1/push, and PostgreSQL outages
 * (a TCP proxy in front of the real server that can refuse connections).
 */

interface Ctx {
  sql: pg.Pool;
  /** Straight to the database; it owns the database and `sql`. */
  main: HttpStack;
  proxy: PgProxy;
  /** On main's database and `sql`, with its engine connected through `proxy`. */
  viaProxy: HttpStack;
}
const test = anyTest as TestFn<Ctx>;

/**
 * A TCP proxy to PostgreSQL. down() cuts every open connection and refuses
 * new ones, which is what a restarting database looks like to the pool.
 * stall() holds back everything the clients send (queries hang) until
 * resume(), which is what a database stuck on a lock looks like.
 */
class PgProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly links = new Set<{ client: net.Socket; upstream: net.Socket }>();
  private refusing = false;
  private stalled = false;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => {
      if (this.refusing) return void client.destroy();
      const upstream = net.connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      const link = { client, upstream };
      this.links.add(link);
      upstream.pipe(client);
      if (this.stalled) client.pause();
      else client.pipe(upstream);
      client.on('close', () => {
        this.links.delete(link);
        upstream.destroy();
      });
      upstream.on('close', () => client.destroy());
    });
  }

  stall(): void {
    this.stalled = true;
    for (const { client, upstream } of this.links) {
      client.unpipe(upstream);
      client.pause();
    }
  }

  resume(): void {
    this.stalled = false;
    // pipe() resumes the paused client, and what it buffered flows on.
    for (const { client, upstream } of this.links) client.pipe(upstream);
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  down(): void {
    this.refusing = true;
    for (const s of this.sockets) s.destroy();
  }

  up(): void {
    this.refusing = false;
  }

  async close(): Promise<void> {
    this.down();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

test.before(async (t) => {
  const main = await startHttpStack('http_push', { maxBodyBytes: 4 << 20 });
  const u = new URL(main.db.url);
  const proxy = new PgProxy({ host: u.hostname, port: Number(u.port || 5432) });
  await proxy.listen();
  const proxied = new URL(main.db.url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  // A small in-flight budget, so one stalled 2 KiB push is enough to overload it.
  const viaProxy = await startHttpStack('http_push', {
    database: main,
    engineUrl: proxied.toString(),
    maxBodyBytes: 4 << 20,
    maxInflightBytes: 1024,
  });
  t.context = { sql: main.sql, main, proxy, viaProxy };
});

teardownAndCheckLeaks(test, async (t) => {
  // viaProxy first: it borrows the database that main's stop() drops.
  t.context.proxy?.up();
  t.context.proxy?.resume();
  await t.context.viaProxy?.stop();
  await t.context.proxy?.close();
  await t.context.main?.stop();
});

async function counts(t: { context: Ctx }, queue: string, partition: string) {
  const r = await t.context.sql.query(
    `SELECT lp.last_offset,
            (SELECT count(*) FROM queen.log_segments s WHERE s.partition_id = lp.id)::int AS segments,
            (SELECT count(*) FROM queen.log_txns x WHERE x.partition_id = lp.id)::int AS txns
     FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
     WHERE q.name = $1 AND lp.name = $2`,
    [queue, partition],
  );
  if (r.rowCount === 0) return undefined;
  return { lastOffset: Number(r.rows[0].last_offset), segments: r.rows[0].segments as number, txns: r.rows[0].txns as number };
}

const post = (url: string, path: string, body: unknown) =>
  fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

test('the seed example through the client: the retry is a duplicate with the first id and writes nothing', async (t) => {
  const client = new Queen({ url: t.context.main.api.url });
  const first = await client
    .queue('payments')
    .partition('customer-42')
    .push([{ transactionId: 'order-9137-paid', data: { orderId: 9137, amount: 99.5 } }]);
  t.is(first[0]!.status, 'queued');
  t.regex(first[0]!.id!, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  t.is(first[0]!.transactionId, 'order-9137-paid');
  const before = await counts(t, 'payments', 'customer-42');
  t.deepEqual(before, { lastOffset: 0, segments: 1, txns: 1 });

  const retry = await client
    .queue('payments')
    .partition('customer-42')
    .push([{ transactionId: 'order-9137-paid', data: { orderId: 9137, amount: 99.5 } }]);
  t.is(retry[0]!.status, 'duplicate');
  t.is(retry[0]!.id, first[0]!.id);
  t.is(retry[0]!.offset, first[0]!.offset);
  t.deepEqual(await counts(t, 'payments', 'customer-42'), before, 'the second push wrote nothing');
});

test('the stored payload is the JSON text of data; payload is the wire name and data its alias', async (t) => {
  const { url } = t.context.main.api;
  const res = await post(url, '/api/v1/push', {
    items: [
      { queue: 'wire', partition: 'p', transactionId: 'a', payload: { n: 1, s: 'x' } },
      { queue: 'wire', partition: 'p', transactionId: 'b', data: [1, 2] },
      { queue: 'wire', transactionId: 'c', payload: null },
      { queue: 'wire', partition: 'p', transactionId: 'd', payload: 'text' },
    ],
  });
  t.is(res.status, 201);
  const body = (await res.json()) as Record<string, unknown>[];
  t.deepEqual(
    body.map((r) => [r.index, r.status, r.queue, r.partition, r.transactionId, r.offset]),
    [
      [0, 'queued', 'wire', 'p', 'a', 0],
      [1, 'queued', 'wire', 'p', 'b', 1],
      [2, 'queued', 'wire', 'Default', 'c', 0],
      [3, 'queued', 'wire', 'p', 'd', 2],
    ],
  );
  for (const r of body) {
    t.regex(r.messageId as string, /^[0-9a-f-]{36}$/);
    // The 0.1.x snake_case names, kept for one release with the same values.
    t.is(r.message_id, r.messageId);
    t.is(r.transaction_id, r.transactionId);
    t.false('error' in r);
  }
  const { unpackSegment } = await import('../../src/engine/frames.js');
  const segs = await t.context.sql.query(
    `SELECT s.blob FROM queen.log_segments s JOIN queen.log_partitions lp ON lp.id = s.partition_id
     JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'wire' AND lp.name = 'p'`,
  );
  const payloads = segs.rows.flatMap((r) => unpackSegment(r.blob).map((f) => f.payload.toString('utf8')));
  t.deepEqual(payloads, ['{"n":1,"s":"x"}', '[1,2]', '"text"']);
});

test('the client pushes to "Default" without a partition and mints transactionIds that are kept', async (t) => {
  const client = new Queen({ url: t.context.main.api.url });
  const res = await client.queue('minted').push([{ data: 1 }, { data: 1 }]);
  t.deepEqual(
    res.map((r) => [r.status, r.partition, r.offset]),
    [
      ['queued', 'Default', 0],
      ['queued', 'Default', 1],
    ],
  );
  t.regex(res[0]!.transactionId!, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  t.not(res[0]!.transactionId, res[1]!.transactionId);
});

test('a push whose answer is lost is retried by the client and answered duplicate, not written twice', async (t) => {
  const { url } = t.context.main.api;
  let calls = 0;
  // The real request reaches the real server and commits; only the answer is
  // lost on the way back, as with a dropped connection.
  const losingFetch: typeof fetch = async (input, init) => {
    calls++;
    const res = await fetch(input, init);
    if (calls === 1) {
      await res.arrayBuffer();
      throw new TypeError('fetch failed: connection reset while reading the answer');
    }
    return res;
  };
  const client = new Queen({ url, fetch: losingFetch, baseDelayMs: 1 });
  const [r] = await client
    .queue('lost-answer')
    .partition('p')
    .push([{ data: { amount: 5 } }]);
  t.is(calls, 2);
  t.is(r!.status, 'duplicate', 'the retry found the first attempt');
  t.is(r!.offset, 0);
  t.deepEqual(await counts(t, 'lost-answer', 'p'), { lastOffset: 0, segments: 1, txns: 1 });
});

test('a batch mixes queued, duplicate and failed items in request order', async (t) => {
  const client = new Queen({ url: t.context.main.api.url });
  const q = client.queue('mixed').partition('p');
  const [orig] = await q.push([{ transactionId: 'x', data: 0 }]);
  const res = await q.push([
    { transactionId: 'y', data: 1 },
    { transactionId: 'x', data: 2 },
    { transactionId: '', data: 3 },
    { transactionId: 'y', data: 4 },
  ]);
  t.deepEqual(
    res.map((r) => r.status),
    ['queued', 'duplicate', 'failed', 'duplicate'],
  );
  t.is(res[1]!.id, orig!.id);
  t.is(res[3]!.id, res[0]!.id, 'a repeat within one request follows its leader');
  t.regex(res[2]!.error!, /transactionId/);
  t.deepEqual(await counts(t, 'mixed', 'p'), { lastOffset: 1, segments: 2, txns: 2 });
});

test.serial('PostgreSQL down: push and health answer 503 with Retry-After; both recover when it returns', async (t) => {
  const { viaProxy, proxy } = t.context;
  const url = viaProxy.api.url;
  // Warm the path first so the outage hits a running stack.
  const warm = await post(url, '/api/v1/push', { items: [{ queue: 'outage', partition: 'p', transactionId: 'before', payload: 1 }] });
  t.is(warm.status, 201);

  proxy.down();
  t.teardown(() => proxy.up());
  const push = await post(url, '/api/v1/push', { items: [{ queue: 'outage', partition: 'p', transactionId: 'during', payload: 2 }] });
  t.is(push.status, 503);
  t.is(push.headers.get('retry-after'), '1');
  t.like(await push.json(), { error: 'unavailable', retriable: true });
  const health = await fetch(`${url}/health`);
  t.is(health.status, 503);
  t.is(health.headers.get('retry-after'), '1');
  const get = await fetch(`${url}/api/v1/resources/queues/outage`);
  t.is(get.status, 503, 'a read during the outage is unavailable, not "not found"');

  proxy.up();
  t.is((await fetch(`${url}/health`)).status, 200);
  const after = await post(url, '/api/v1/push', { items: [{ queue: 'outage', partition: 'p', transactionId: 'during', payload: 2 }] });
  t.is(after.status, 201);
  t.is(((await after.json()) as { status: string }[])[0]!.status, 'queued');
  t.deepEqual(await counts(t, 'outage', 'p'), { lastOffset: 1, segments: 2, txns: 2 });
});

test.serial('the client retries 503 with backoff until PostgreSQL is back, and the push lands once', async (t) => {
  const { viaProxy, proxy } = t.context;
  // Serial: ava runs the serial tests of a file one by one, before the
  // concurrent ones, so the two outages never overlap.
  proxy.down();
  t.teardown(() => proxy.up());
  const reasons: string[] = [];
  const client = new Queen({
    url: viaProxy.api.url,
    baseDelayMs: 5,
    maxDelayMs: 50,
    retries: 20,
    // The database comes back as soon as the client has seen one 503.
    onRetry: ({ reason }) => {
      reasons.push(reason);
      proxy.up();
    },
  });
  const [r] = await client
    .queue('outage-retry')
    .partition('p')
    .push([{ transactionId: 'once', data: { a: 1 } }]);
  t.is(r!.status, 'queued');
  t.true(reasons.length >= 1);
  t.is(reasons[0], 'HTTP 503');
  t.deepEqual(await counts(t, 'outage-retry', 'p'), { lastOffset: 0, segments: 1, txns: 1 });
});

test.serial('overload: while the push path holds more than its budget, pushes are shed with 503', async (t) => {
  const { viaProxy, proxy } = t.context;
  const url = viaProxy.api.url;
  t.is((await post(url, '/api/v1/push', { items: [{ queue: 'shed', partition: 'p', transactionId: 'warm', payload: 0 }] })).status, 201);
  proxy.stall();
  t.teardown(() => proxy.resume());
  const big = post(url, '/api/v1/push', { items: [{ queue: 'shed', partition: 'p', transactionId: 'big', payload: 'x'.repeat(2048) }] });
  await waitFor('the stalled push to overload the fusion layer', () => viaProxy.fusion.overloaded);
  const shed = await post(url, '/api/v1/push', { items: [{ queue: 'shed', partition: 'p', transactionId: 'small', payload: 1 }] });
  t.is(shed.status, 503);
  t.is(shed.headers.get('retry-after'), '1');
  t.like(await shed.json(), {
    error: 'unavailable',
    retriable: true,
    message: 'the push path is over its in-flight byte budget; retry later',
  });
  proxy.resume();
  const res = await big;
  t.is(res.status, 201);
  t.is(((await res.json()) as { status: string }[])[0]!.status, 'queued');
  t.false(viaProxy.fusion.overloaded);
  t.deepEqual(await counts(t, 'shed', 'p'), { lastOffset: 1, segments: 2, txns: 2 }, 'the shed push wrote nothing');
});

test('a 4xx is not retried and surfaces as QueenHttpError', async (t) => {
  let retries = 0;
  const client = new Queen({ url: t.context.main.api.url, onRetry: () => retries++ });
  const err = await t.throwsAsync(client.queue('no-such-queue-here').get(), { instanceOf: QueenHttpError });
  t.is(err.status, 404);
  t.is(err.code, 'not_found');
  t.is(retries, 0);
});

test('a port already in use fails start() and leaves nothing running', async (t) => {
  const { main } = t.context;
  const clash = new HttpApi({
    fusion: main.fusion,
    pool: main.engine.pool,
    metrics: new MetricsRegistry(),
    maxBodyBytes: 1024,
    host: '127.0.0.1',
    port: main.api.port,
  });
  await t.throwsAsync(clash.start(), { message: /EADDRINUSE/ });
  t.is(clash.state, 'stopped');
  t.is((await fetch(`${main.api.url}/health`)).status, 200, 'the running API is untouched');
});

test('GET /metrics is Prometheus text including the push path counters', async (t) => {
  const client = new Queen({ url: t.context.main.api.url });
  await client.queue('metered').push([{ data: 1 }]);
  const res = await fetch(`${t.context.main.api.url}/metrics`);
  t.is(res.status, 200);
  t.regex(res.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  t.regex(text, /# TYPE queen_fusion_items_total counter/);
  t.regex(text, /queen_http_responses_total\{status="201"\} \d+/);
});
