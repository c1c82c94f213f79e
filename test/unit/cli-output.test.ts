import test from 'ava';
import { fakeQueen, queenctlIn } from '../helpers/fakeQueen.js';

/** queenctl -o wide|name|jsonpath on get, timers and dlq, and the dlq commands, against a fake API. */

const OPTIONS = { dedupWindowSeconds: 60, retentionSeconds: 86400, completedRetentionSeconds: 3600, leaseTime: 300, retryLimit: 3 };
const QUEUE = (name: string) => ({
  queue: name,
  options: OPTIONS,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-02T00:00:00.000Z',
  partitions: 2,
});
const MESSAGE = (offset: number) => ({
  id: `0190000${offset}-0000-7000-8000-000000000000`,
  transactionId: `t${offset}`,
  partition: 'Default',
  partitionId: 1,
  offset,
  createdAt: '2026-01-01T00:00:00.000Z',
  data: { n: offset },
  traceContext: null,
});
const DEAD = (id: number, requeuedAt: string | null = null) => ({
  id,
  queue: 'orders',
  partition: 'Default',
  partitionId: 1,
  consumerGroup: 'billing',
  offset: id * 10,
  messageId: `m-${id}`,
  transactionId: `t-${id}`,
  data: { id },
  traceContext: null,
  error: `boom ${id}`,
  attempts: 3,
  createdAt: '2026-01-03T00:00:00.000Z',
  requeuedAt,
});

async function api(t: { teardown(fn: () => Promise<void>): void }) {
  const fake = await fakeQueen({
    'GET /api/v1/resources/queues': () => ({ body: { queues: [QUEUE('orders'), QUEUE('payments')] } }),
    'GET /api/v1/resources/queues/orders': () => ({ body: QUEUE('orders') }),
    'GET /api/v1/messages': () => ({
      body: {
        queue: 'orders',
        partition: 'Default',
        partitionId: 1,
        logStart: 0,
        lastOffset: 1,
        messages: [MESSAGE(0), MESSAGE(1)],
        next: null,
      },
    }),
    'GET /api/v1/timers/orders': () => ({
      body: {
        queue: 'orders',
        timers: [
          { key: 'k1', partition: 'Default', deliverAt: '2026-01-05T00:00:00.000Z', transactionId: 'tt1', messageId: 'mm1', attempts: 0 },
        ],
      },
    }),
    'GET /api/v1/dlq': (r) => ({ body: { deadLetters: [DEAD(1), DEAD(2)], next: r.query.get('limit') === '2' ? 2 : null } }),
    'POST /api/v1/dlq/1/requeue': () => ({
      body: {
        deadLetter: DEAD(1, '2026-01-04T00:00:00.000Z'),
        push: {
          index: 0,
          messageId: 'new-1',
          transactionId: 't-1#requeue-1',
          message_id: 'new-1',
          transaction_id: 't-1#requeue-1',
          queue: 'orders',
          partition: 'Default',
          status: 'queued',
          offset: 7,
        },
      },
    }),
    'POST /api/v1/dlq/2/requeue': () => ({
      status: 409,
      body: { error: 'conflict', message: 'dead letter 2 was requeued already', retriable: false },
    }),
  });
  t.teardown(() => fake.close());
  return { fake, env: { QUEEN_URL: fake.url } };
}

test('get queues: -o name is queue/NAME a line, -o wide adds the other options, -o jsonpath reads the list', async (t) => {
  const { env } = await api(t);
  t.deepEqual(await queenctlIn(['get', 'queues', '-o', 'name'], { env }), { code: 0, out: 'queue/orders\nqueue/payments\n', err: '' });
  t.is((await queenctlIn(['get', 'queue', 'orders', '-o', 'name'], { env })).out, 'queue/orders\n');
  const table = (await queenctlIn(['get', 'queues'], { env })).out.split('\n');
  const wide = (await queenctlIn(['get', 'queues', '-o', 'wide'], { env })).out.split('\n');
  t.regex(table[0]!, /^NAME\s+DEDUP WINDOW \(S\)\s+PARTITIONS\s+CREATED\s+UPDATED$/);
  t.regex(
    wide[0]!,
    /^NAME\s+DEDUP WINDOW \(S\)\s+PARTITIONS\s+RETENTION \(S\)\s+COMPLETED RETENTION \(S\)\s+LEASE \(S\)\s+RETRY LIMIT\s+CREATED\s+UPDATED$/,
  );
  t.regex(wide[1]!, /^orders\s+60\s+2\s+86400\s+3600\s+300\s+3\s+2026-01-01T00:00:00.000Z\s+2026-01-02T00:00:00.000Z$/);
  t.is((await queenctlIn(['get', 'queues', '-o', 'jsonpath={.queues[*].queue}'], { env })).out, 'orders payments');
  t.is(
    (await queenctlIn(['get', 'queues', '-o', 'jsonpath={range .queues[*]}{.queue}{"\\t"}{.options.retryLimit}{"\\n"}{end}'], { env })).out,
    'orders\t3\npayments\t3\n',
  );
  t.is((await queenctlIn(['get', 'queue', 'orders', '-o=jsonpath={.options.leaseTime}'], { env })).out, '300');
});

test('get messages: -o name is message/ID, -o wide adds the message id and trace context', async (t) => {
  const { env } = await api(t);
  t.is(
    (await queenctlIn(['get', 'messages', 'orders', '-o', 'name'], { env })).out,
    'message/01900000-0000-7000-8000-000000000000\nmessage/01900001-0000-7000-8000-000000000000\n',
  );
  const wide = (await queenctlIn(['get', 'messages', 'orders', '-o', 'wide'], { env })).out.split('\n');
  t.regex(wide[0]!, /^PARTITION\s+OFFSET\s+MESSAGE ID\s+TRANSACTION ID\s+CREATED\s+TRACE CONTEXT\s+DATA$/);
  t.regex(wide[2]!, /^Default\s+1\s+01900001-0000-7000-8000-000000000000\s+t1\s+2026-01-01T00:00:00.000Z\s+\{"n":1\}$/);
  t.is((await queenctlIn(['get', 'messages', 'orders', '-o', 'jsonpath={.messages[?(@.offset==1)].data.n}'], { env })).out, '1');
});

test('timers list: -o name is timer/KEY, -o wide adds the transactionId', async (t) => {
  const { env } = await api(t);
  t.is((await queenctlIn(['timers', 'list', 'orders', '-o', 'name'], { env })).out, 'timer/k1\n');
  const wide = (await queenctlIn(['timers', 'list', 'orders', '-o', 'wide'], { env })).out.split('\n');
  t.regex(wide[0]!, /^KEY\s+PARTITION\s+DELIVER AT\s+MESSAGE ID\s+TRANSACTION ID\s+ATTEMPTS$/);
  t.regex(wide[1]!, /^k1\s+Default\s+2026-01-05T00:00:00.000Z\s+mm1\s+tt1\s+0$/);
});

test('a bad -o is a usage error that lists the formats; jsonpath needs a template', async (t) => {
  const { fake, env } = await api(t);
  const bad = await queenctlIn(['get', 'queues', '-o', 'xml'], { env });
  t.is(bad.code, 2);
  t.regex(bad.err, /-o must be table, wide, name, json, yaml, jsonpath=TEMPLATE, got "xml"/);
  const empty = await queenctlIn(['get', 'queues', '-o', 'jsonpath='], { env });
  t.is(empty.code, 2);
  t.regex(empty.err, /-o jsonpath needs a template/);
  const broken = await queenctlIn(['get', 'queues', '-o', 'jsonpath={.queues[1,2]}'], { env });
  t.is(broken.code, 2);
  t.regex(broken.err, /unsupported/);
  t.is(fake.requests.length, 0, 'nothing is asked before the format is known to be good');
});

test('dlq list: a table, wide with the error and data, name, the page parameters, and where a full page continues', async (t) => {
  const { fake, env } = await api(t);
  const r = await queenctlIn(['dlq', 'list', 'orders', '--group', 'billing', '--after', '0', '--limit', '2'], { env });
  t.is(r.code, 0, r.err);
  const lines = r.out.split('\n');
  t.regex(lines[0]!, /^ID\s+PARTITION\s+GROUP\s+OFFSET\s+TRANSACTION ID\s+ATTEMPTS\s+CREATED\s+REQUEUED$/);
  t.regex(lines[1]!, /^1\s+Default\s+billing\s+10\s+t-1\s+3\s+2026-01-03T00:00:00.000Z$/);
  t.is(lines[3], 'more after id 2 (--after 2)');
  const q = fake.requests.at(-1)!.query;
  t.deepEqual(Object.fromEntries(q), { queue: 'orders', consumerGroup: 'billing', after: '0', limit: '2' });
  const wide = (await queenctlIn(['dlq', 'list', 'orders', '-o', 'wide'], { env })).out.split('\n');
  t.regex(wide[0]!, /REQUEUED\s+MESSAGE ID\s+ERROR\s+DATA$/);
  t.regex(wide[2]!, /m-2\s+boom 2\s+\{"id":2\}$/);
  t.is((await queenctlIn(['dlq', 'list', 'orders', '-o', 'name'], { env })).out, 'deadletter/1\ndeadletter/2\n');
  t.is((await queenctlIn(['dlq', 'list', 'orders', '-o', 'jsonpath={.deadLetters[*].error}'], { env })).out, 'boom 1 boom 2');
  t.deepEqual(JSON.parse((await queenctlIn(['dlq', 'list', 'orders', '-o', 'json'], { env })).out).deadLetters[0], DEAD(1));
  for (const args of [['dlq', 'list'], ['dlq', 'list', 'a', 'b'], ['dlq', 'list', 'orders', '--limit', '0'], ['dlq', 'nope'], ['dlq']]) {
    t.is((await queenctlIn(args, { env })).code, 2, args.join(' '));
  }
});

test('dlq requeue: each id its own answer; one refused does not stop the others; exit 1 then', async (t) => {
  const { fake, env } = await api(t);
  const r = await queenctlIn(['dlq', 'requeue', '2', '1'], { env });
  t.is(r.code, 1);
  t.is(r.out, 'deadletter/1 requeued: queued id=new-1 offset=7 partition=Default transactionId=t-1#requeue-1\n');
  t.regex(r.err, /deadletter\/2: dead letter 2 was requeued already \(HTTP 409 on POST \/api\/v1\/dlq\/2\/requeue\)/);
  t.regex(r.err, /1 of 2 dead letters were not requeued/);
  t.deepEqual(
    fake.requests.map((x) => `${x.method} ${x.path}`),
    ['POST /api/v1/dlq/2/requeue', 'POST /api/v1/dlq/1/requeue'],
  );
  t.is((await queenctlIn(['dlq', 'requeue', '1', '-o', 'name'], { env })).out, 'deadletter/1\n');
  const json = JSON.parse((await queenctlIn(['dlq', 'requeue', '1', '-o', 'json'], { env })).out);
  t.like(json.requeued[0], { deadLetter: { id: 1 }, push: { status: 'queued', id: 'new-1', offset: 7 } });
  // Every id is checked before the first request.
  const before = fake.requests.length;
  const bad = await queenctlIn(['dlq', 'requeue', '1', 'x'], { env });
  t.is(bad.code, 2);
  t.regex(bad.err, /dead-letter ID must be a positive integer, got "x"/);
  t.is((await queenctlIn(['dlq', 'requeue'], { env })).code, 2);
  t.is(fake.requests.length, before);
});
