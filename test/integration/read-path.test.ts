import anyTest, { type TestFn } from 'ava';
import fc from 'fast-check';
import pg from 'pg';
import { QueenHttpError, type Message } from '../../src/client/index.js';
import { ACK_STATUSES, ackOptimistic, applyAcks, type AckItem } from '../../src/engine/acks.js';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';

/**
 * The read side against real PostgreSQL, through HTTP and the client: FIFO,
 * consumer groups, leases (no overlap, expiry, extension), acks by
 * transactionId and id with their edge cases, retryLimit -> dead letters,
 * subscription modes, event-driven long poll, transactions, bad input.
 */

interface Ctx {
  s: HttpStack;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  // A huge safety re-check: a long poll that returns early was woken by an event.
  t.context.s = await startHttpStack('read_path', { readRecheckMs: 600_000 });
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.s?.stop();
});

async function pushN(s: HttpStack, queue: string, n: number, partition = 'p0', prefix = 'm'): Promise<void> {
  const items = Array.from({ length: n }, (_, i) => ({ transactionId: `${prefix}-${i}`, data: { i, prefix } }));
  const r = await s.client.queue(queue).partition(partition).push(items);
  if (r.some((x) => x.status !== 'queued')) throw new Error(`push: ${JSON.stringify(r.find((x) => x.status !== 'queued'))}`);
}

async function api(s: HttpStack, method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${s.api.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function cursor(s: HttpStack, queue: string, group: string): Promise<{ committed: number; leaseEnd: number | null }[]> {
  const r = await s.sql.query(
    `SELECT c.committed_offset, c.lease_end FROM queen.log_cursors c JOIN queen.log_partitions lp ON lp.id = c.partition_id
     JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 AND c.consumer_group = $2 ORDER BY lp.id`,
    [queue, group],
  );
  return r.rows.map((x) => ({ committed: Number(x.committed_offset), leaseEnd: x.lease_end === null ? null : Number(x.lease_end) }));
}

test('FIFO per partition per group: batches come in offset order, each message once', async (t) => {
  const { s } = t.context;
  await pushN(s, 'fifo', 53);
  const seen: number[] = [];
  for (;;) {
    const msgs = await s.client.queue('fifo').pop({ group: 'g', batch: 7 });
    if (msgs.length === 0) break;
    t.true(msgs.length <= 7);
    for (const m of msgs) seen.push((m.data as { i: number }).i);
    const acks = await s.client.ack(msgs);
    t.deepEqual(
      acks.map((a) => a.result),
      msgs.map(() => 'acked'),
    );
  }
  t.deepEqual(
    seen,
    Array.from({ length: 53 }, (_, i) => i),
  );
  t.deepEqual(await cursor(s, 'fifo', 'g'), [{ committed: 52, leaseEnd: null }]);
});

test('two groups each receive every message once; queue mode is its own group', async (t) => {
  const { s } = t.context;
  await pushN(s, 'groups', 20, 'a');
  await pushN(s, 'groups', 20, 'b', 'n');
  const drain = async (group: string | undefined): Promise<string[]> => {
    const got: string[] = [];
    for (;;) {
      const msgs = await s.client.queue('groups').pop({ ...(group ? { group } : {}), batch: 6 });
      if (msgs.length === 0) return got;
      got.push(...msgs.map((m) => m.transactionId));
      await s.client.ack(msgs);
    }
  };
  const [g1, g2, qm] = await Promise.all([drain('g1'), drain('g2'), drain(undefined)]);
  for (const got of [g1, g2, qm]) {
    t.is(got.length, 40);
    t.is(new Set(got).size, 40);
  }
});

test('one ack request interleaving two groups on one partition settles each item in its own group', async (t) => {
  const { s } = t.context;
  await pushN(s, 'mixack', 6);
  const a = await s.client.queue('mixack').pop({ group: 'ga', batch: 6 });
  const b = await s.client.queue('mixack').pop({ group: 'gb', batch: 6 });
  t.is(a.length, 6);
  t.is(b.length, 6);
  // a0 b0 a1 b1 ...: the same partition, the group changing at every item,
  // and runs of each group's lease in between (a4 a5 then b4 b5).
  const mixed = [a[0]!, b[0]!, a[1]!, b[1]!, a[2]!, b[2]!, a[3]!, b[3]!, a[4]!, a[5]!, b[4]!, b[5]!];
  const out = await s.client.ack(mixed);
  t.deepEqual(
    out.map((o) => o.result),
    mixed.map(() => 'acked'),
  );
  t.deepEqual(await cursor(s, 'mixack', 'ga'), [{ committed: 5, leaseEnd: null }]);
  t.deepEqual(await cursor(s, 'mixack', 'gb'), [{ committed: 5, leaseEnd: null }]);
});

test('two concurrent poppers never hold overlapping leases (random interleavings)', async (t) => {
  const { s } = t.context;
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          who: fc.constantFrom(0, 1),
          op: fc.constantFrom('pop', 'pop', 'ack', 'fail', 'expire'),
          batch: fc.integer({ min: 1, max: 5 }),
        }),
        { minLength: 5, maxLength: 25 },
      ),
      async (steps) => {
        const queue = `overlap-${run++}`;
        await s.client
          .queue(queue)
          .partition('x')
          .push(Array.from({ length: 12 }, (_, i) => ({ transactionId: `t${i}`, data: i })));
        await s.client
          .queue(queue)
          .partition('y')
          .push(Array.from({ length: 12 }, (_, i) => ({ transactionId: `t${i}`, data: i })));
        const held: Message[][] = [[], []];
        const check = (): void => {
          const keys = held.map((h) => new Set(h.map((m) => `${m.partitionId}:${m.offset}`)));
          for (const k of keys[0]!) if (keys[1]!.has(k)) throw new Error(`both poppers hold ${k}`);
        };
        for (const step of steps) {
          const mine = held[step.who]!;
          if (step.op === 'pop') {
            // Both poppers pop at once: real concurrency on the cursor rows.
            const [a, b] = await Promise.all(
              [0, 1].map(() => s.client.queue(queue).pop({ group: 'g', batch: step.batch, leaseSeconds: 300 })),
            );
            held[0]!.push(...a!);
            held[1]!.push(...b!);
          } else if (step.op === 'expire' && mine.length > 0) {
            // Time travel instead of a sleep: this popper's leases are now expired.
            await s.sql.query(
              "UPDATE queen.log_cursors SET lease_expires_at = now() - interval '1 second' WHERE lease_id = ANY($1::uuid[])",
              [[...new Set(mine.map((m) => m.leaseId))]],
            );
            mine.length = 0;
          } else if ((step.op === 'ack' || step.op === 'fail') && mine.length > 0) {
            const r = await s.client.ack(mine, step.op === 'ack' ? 'completed' : 'retry');
            if (r.some((x) => x.result !== 'acked' && x.result !== 'released'))
              throw new Error(`ack of a held lease answered ${JSON.stringify(r)}`);
            mine.length = 0;
          }
          check();
        }
      },
    ),
    { numRuns: 12, seed: 42 },
  );
  t.pass();
});

test('an expired lease is redelivered; its stale lease id then answers lease_expired and changes nothing', async (t) => {
  const { s } = t.context;
  await pushN(s, 'expiry', 3);
  const first = await s.client.queue('expiry').pop({ group: 'g', batch: 3, leaseSeconds: 1 });
  t.is(first.length, 3);
  // The lease really expires (1 s); the second pop long-polls until it can take it over.
  const again = await s.client.queue('expiry').pop({ group: 'g', batch: 3, wait: true, timeoutMs: 20_000 });
  t.deepEqual(
    again.map((m) => m.offset),
    first.map((m) => m.offset),
  );
  t.not(again[0]!.leaseId, first[0]!.leaseId);
  t.true(s.metrics.counter('queen_lease_expiries_total', '').get() >= 1);
  const stale = await s.client.ack(first);
  t.deepEqual(
    stale.map((r) => r.result),
    ['lease_expired', 'lease_expired', 'lease_expired'],
  );
  t.deepEqual(await cursor(s, 'expiry', 'g'), [{ committed: -1, leaseEnd: 2 }]);
  const ok = await s.client.ack(again);
  t.deepEqual(
    ok.map((r) => r.result),
    ['acked', 'acked', 'acked'],
  );
  t.deepEqual(await cursor(s, 'expiry', 'g'), [{ committed: 2, leaseEnd: null }]);
});

test('leaseTime and retryLimit are queue options: a pop naming no lease takes the queue lease; bad values are 400', async (t) => {
  const { s } = t.context;
  const q = s.client.queue('opts');
  const made = await q.configure({ leaseTime: 1 });
  t.like(made.options, { leaseTime: 1, retryLimit: 3 });
  await pushN(s, 'opts', 2);
  const first = await q.pop({ group: 'g', batch: 2 });
  t.is(first.length, 2);
  // No leaseSeconds in the request: the queue's 1 s lease applies, so the span comes back (the default 300 s would not).
  const again = await q.pop({ group: 'g', batch: 2, wait: true, timeoutMs: 20_000 });
  t.deepEqual(
    again.map((m) => m.offset),
    first.map((m) => m.offset),
  );
  for (const bad of [{ leaseTime: 0 }, { leaseTime: 1.5 }, { retryLimit: -1 }, { retryLimit: '3' }]) {
    const r = await api(s, 'POST', '/api/v1/configure', { queue: 'opts', options: bad });
    t.is(r.status, 400, JSON.stringify(bad));
    t.regex(JSON.stringify(r.body), new RegExp(Object.keys(bad)[0]!));
  }
  t.like((await q.get()).options, { leaseTime: 1, retryLimit: 3 }, 'a refused configure changed nothing');
  // replace re-derives omitted keys from the defaults; null restores one.
  t.like((await q.configure({ retryLimit: 0 }, { mode: 'replace' })).options, { leaseTime: 300, retryLimit: 0 });
  t.like((await q.configure({ retryLimit: null })).options, { leaseTime: 300, retryLimit: 3 });
});

test('lease extend keeps a lease; an unknown lease is 409, a malformed one 400', async (t) => {
  const { s } = t.context;
  await pushN(s, 'extend', 1);
  const [m] = await s.client.queue('extend').pop({ group: 'g', leaseSeconds: 5 });
  const r = await api(s, 'POST', `/api/v1/lease/${m!.leaseId}/extend`, { seconds: 600 });
  t.is(r.status, 200);
  t.true(Date.parse(r.body.leaseExpiresAt) > Date.now() + 500_000);
  t.is((await api(s, 'POST', '/api/v1/lease/00000000-0000-4000-8000-000000000000/extend', { seconds: 5 })).status, 409);
  const bad = await api(s, 'POST', '/api/v1/lease/not-a-lease/extend', { seconds: 5 });
  t.is(bad.status, 400);
  t.regex(bad.body.message, /leaseId/);
  t.is((await api(s, 'POST', `/api/v1/lease/${m!.leaseId}/extend`, { seconds: 0 })).status, 400);
});

// Serial: ava runs it before this file's concurrent tests, so the counter
// moves only by this batch.
test.serial('an ack batch counts each item once under its result (queen_acks_total)', async (t) => {
  const { s } = t.context;
  const p = s.client.queue('ackcount').partition('p');
  await p.push([
    { transactionId: 'c1', data: 1 },
    { transactionId: 'c2', data: 2 },
  ]);
  const leased = await s.client.queue('ackcount').pop({ group: 'g', batch: 10 });
  t.is(leased.length, 2);
  const acks = s.metrics.counter('queen_acks_total', '');
  const before = { acked: acks.get('acked'), not_found: acks.get('not_found'), already_acked: acks.get('already_acked') };
  const item = (transactionId: string): Record<string, unknown> => ({ transactionId, partitionId: leased[0]!.partitionId });
  const batch = await api(s, 'POST', '/api/v1/ack/batch', {
    consumerGroup: 'g',
    acknowledgments: [item('c1'), item('c2'), item('c1'), item('never-pushed')],
  });
  t.deepEqual(
    batch.body.results.map((r: { result: string }) => r.result),
    ['acked', 'acked', 'already_acked', 'not_found'],
  );
  t.deepEqual(
    {
      acked: acks.get('acked') - before.acked,
      not_found: acks.get('not_found') - before.not_found,
      already_acked: acks.get('already_acked') - before.already_acked,
    },
    { acked: 2, not_found: 1, already_acked: 1 },
  );
});

test('acks resolved against the decoded lease span of the pop answer exactly as the log_txns path does (random batches)', async (t) => {
  const { s } = t.context;
  await s.client.queue('leasespan').configure({ dedupWindowSeconds: 0 });
  // Window 0: transactionIds repeat inside the span (t0..t3 over 24 offsets).
  const names = ['t0', 't1', 't2', 't3'];
  await s.client
    .queue('leasespan')
    .partition('p')
    .push(Array.from({ length: 24 }, (_, i) => ({ transactionId: names[(i * 7) % names.length]!, data: i })));
  const pop = await s.read.pop({ queue: 'leasespan', consumerGroup: 'g', batch: 20, subscriptionMode: 'all', autoAck: false }, 0);
  t.is(pop.messages.length, 20);
  const leaseId = pop.leaseId!;
  const pid = pop.partitionId!;
  t.truthy(s.read.leases.get(leaseId), 'the pop kept its span');
  // Settled out of order (3, 7: by id) and a moved cursor (0), for real.
  const byOffset = (o: number) => pop.messages.find((m) => m.offset === o)!;
  const settle = await s.read.ack(
    [0, 3, 7].map((o) => ({ consumerGroup: 'g', status: 'completed' as const, partitionId: pid, id: byOffset(o).id, leaseId })),
  );
  t.deepEqual(
    settle.map((o) => o.result),
    ['acked', 'acked', 'acked'],
  );
  let localHits = 0;
  let optimisticDeadLetters = 0;
  const lookup = (id: string) => {
    const l = s.read.leases.get(id);
    if (l) localHits++;
    return l;
  };
  const item = fc.record({
    transactionId: fc.constantFrom(...names, 'never-pushed'),
    status: fc.constantFrom(...ACK_STATUSES),
    lease: fc.constantFrom('live', 'other', 'none'),
  });
  await fc.assert(
    fc.asyncProperty(fc.array(item, { minLength: 1, maxLength: 16 }), async (batch) => {
      const items: AckItem[] = batch.map((b) => ({
        consumerGroup: 'g',
        status: b.status,
        partitionId: pid,
        transactionId: b.transactionId,
        leaseId: b.lease === 'live' ? leaseId : b.lease === 'other' ? '00000000-0000-7000-8000-00000000abcd' : undefined,
      }));
      // Each route inside a transaction that is rolled back: its answers and
      // the cursor row it leaves behind. The lease span's known cursor is put
      // back too (an optimistic ack moves it when its write applies).
      const run = async (route: 'locked' | 'locked-sql' | 'optimistic') => {
        const client = await s.sql.connect();
        const span = s.read.leases.get(leaseId)!;
        const known = span.cursor;
        try {
          await client.query('BEGIN');
          const r =
            route === 'optimistic'
              ? await ackOptimistic(client, items, lookup)
              : await applyAcks(client, items, route === 'locked' ? lookup : undefined);
          const row = await client.query(
            `SELECT committed_offset, settled, lease_end, lease_id, released, retry_offsets, retry_counts
             FROM queen.log_cursors WHERE partition_id = $1 AND consumer_group = 'g'`,
            [pid],
          );
          return { r, row: row.rows[0] };
        } finally {
          await client.query('ROLLBACK');
          client.release();
          span.cursor = known;
        }
      };
      const local = await run('locked');
      const viaSql = await run('locked-sql');
      t.deepEqual(local, viaSql);
      // The optimistic ack decides and writes exactly as the locked one,
      // except that it hands a dead-lettering decision to it.
      const optimistic = await run('optimistic');
      if (optimistic.r === 'dead_letter') {
        t.true(typeof local.r !== 'string' && local.r.outcomes.some((o) => o.result === 'dead_lettered'));
        optimisticDeadLetters++;
      } else {
        t.deepEqual(optimistic, local);
      }
    }),
    {
      numRuns: 100,
      seed: 1201,
      // Named more often than it is open in the span: the last answers already_acked, with the span's first offset.
      examples: [[Array.from({ length: 6 }, () => ({ transactionId: 't0', status: 'completed' as const, lease: 'live' as const }))]],
    },
  );
  t.true(localHits > 0, 'the lease span was used');
  t.true(optimisticDeadLetters > 0, 'some batches dead-lettered');
  t.deepEqual(await cursor(s, 'leasespan', 'g'), [{ committed: 0, leaseEnd: 19 }], 'every batch was rolled back');
});

/** Pushes `n` messages, pops them under one lease of group g, and makes ack items for them (transactionId, partition, lease). */
async function leasedBatch(s: HttpStack, queue: string, n: number) {
  await pushN(s, queue, n);
  const pop = await s.read.pop({ queue, consumerGroup: 'g', batch: n, subscriptionMode: 'all', autoAck: false }, 0);
  const item = (i: number): AckItem => ({
    consumerGroup: 'g',
    status: 'completed',
    partitionId: pop.partitionId!,
    transactionId: pop.messages[i]!.transactionId,
    leaseId: pop.leaseId!,
  });
  return { pop, item };
}

/** `client`, calling `before` with each statement's text before sending it. */
function beforeEachQuery(client: pg.Client, before: (text: string) => Promise<void> | void): pg.Client {
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver) as unknown;
      return async (text: string, values?: unknown[]) => {
        await before(text);
        return target.query(text, values);
      };
    },
  });
}

test('an ack of a lease this broker popped is one round trip; a stale guess of its cursor costs a read, never a wrong answer', async (t) => {
  const { s } = t.context;
  const { pop, item } = await leasedBatch(s, 'oneround', 6);
  t.is(pop.messages.length, 6);
  // Its own connection: the test pool (2 clients) stays free for the cursor reads.
  const client = new pg.Client({ connectionString: s.db.url });
  await client.connect();
  try {
    const sent: string[] = [];
    const counting = beforeEachQuery(client, (text) => {
      sent.push(text.includes('log_ack_cas_v1') ? 'cas' : 'other');
    });
    const ack = async (items: AckItem[]) => {
      sent.length = 0;
      const r = await ackOptimistic(counting, items, s.read.leases.get);
      if (typeof r === 'string') throw new Error(`ackOptimistic gave way: ${r}`);
      return r.outcomes.map((o) => o.result);
    };
    // Right after the pop, and again after its own ack: the write alone.
    t.deepEqual(await ack([item(0)]), ['acked']);
    t.deepEqual(sent, ['cas']);
    t.deepEqual(await ack([item(2)]), ['acked']);
    t.deepEqual(sent, ['cas']);
    // Another ack this broker did not see (its own transaction, straight
    // through SQL, not through the counting proxy) moves the cursor: the
    // guess is stale, the write refuses it, and the ack reads the row and
    // decides again.
    await client.query('BEGIN');
    t.deepEqual(
      (await applyAcks(client, [item(1)])).outcomes.map((o) => o.result),
      ['acked'],
    );
    await client.query('COMMIT');
    t.deepEqual(await ack([item(1), item(3)]), ['already_acked', 'acked']);
    t.is(sent[0], 'cas', 'the guess was tried first');
    t.is(sent.filter((x) => x === 'cas').length, 2);
    t.is(sent.at(-1), 'cas');
    t.true(sent.length > 2, 'the row was read between the two writes');
    t.deepEqual(await cursor(s, 'oneround', 'g'), [{ committed: 3, leaseEnd: 5 }]);
    // Learned from that write: one round trip again, to the end of the lease.
    t.deepEqual(await ack([item(4), item(5)]), ['acked', 'acked']);
    t.deepEqual(sent, ['cas']);
    t.deepEqual(await cursor(s, 'oneround', 'g'), [{ committed: 5, leaseEnd: null }]);
  } finally {
    await client.end();
  }
});

test('an optimistic ack writes only onto the cursor it read: a change in between makes it give way, and the locked ack answers', async (t) => {
  const { s } = t.context;
  const { pop, item } = await leasedBatch(s, 'optimistic', 4);
  t.is(pop.messages.length, 4);
  // A real concurrent ack (its own connection, committed) lands between the
  // optimistic ack's read of the cursor and its compare-and-set. The
  // optimistic ack gets a connection of its own, so the test pool (2
  // clients) stays free for the cursor reads.
  const client = new pg.Client({ connectionString: s.db.url });
  await client.connect();
  try {
    let interleaved = 0;
    const racing = beforeEachQuery(client, async (text) => {
      if (text.includes('log_ack_cas_v1') && interleaved++ === 0) {
        t.deepEqual(
          (await s.read.ack([item(0)])).map((o) => o.result),
          ['acked'],
        );
      }
    });
    t.is(await ackOptimistic(racing, [item(0), item(1)]), 'conflict');
    t.is(interleaved, 1);
    t.deepEqual(await cursor(s, 'optimistic', 'g'), [{ committed: 0, leaseEnd: 3 }], 'only the concurrent ack was written');
    // Through ReadPath: the same batch again, under no race, decides on the current state.
    const retriesBefore = s.metrics.counter('queen_ack_locked_retries_total', '', 'reason').get('conflict');
    t.deepEqual(
      (await s.read.ack([item(0), item(1)])).map((o) => o.result),
      ['already_acked', 'acked'],
    );
    t.is(s.metrics.counter('queen_ack_locked_retries_total', '', 'reason').get('conflict'), retriesBefore);
    // Unchanged in between: the compare-and-set applies.
    const done = await ackOptimistic(client, [item(2), item(3)]);
    t.not(typeof done, 'string');
    t.deepEqual(
      (done as Exclude<typeof done, string>).outcomes.map((o) => o.result),
      ['acked', 'acked'],
    );
    t.deepEqual(await cursor(s, 'optimistic', 'g'), [{ committed: 3, leaseEnd: null }]);
  } finally {
    await client.end();
  }
});

test('ack edge cases: below the cursor, unresolvable, a hash twice in the lease, by id, window 0', async (t) => {
  const { s } = t.context;
  await s.client.queue('edges').configure({ dedupWindowSeconds: 0 });
  const p = s.client.queue('edges').partition('p');
  await p.push([{ transactionId: 'dup', data: 1 }]);
  const [m0] = await s.client.queue('edges').pop({ group: 'g' });
  t.deepEqual(
    (await s.client.ack(m0!)).map((r) => r.result),
    ['acked'],
  );
  // Below the cursor.
  const below = await api(s, 'POST', '/api/v1/ack', {
    transactionId: 'dup',
    partitionId: m0!.partitionId,
    consumerGroup: 'g',
    status: 'completed',
  });
  t.is(below.status, 200);
  t.is(below.body.result, 'already_acked');
  // Window 0: the same transactionId is stored again, twice more: three rows share the hash.
  await p.push([
    { transactionId: 'dup', data: 2 },
    { transactionId: 'dup', data: 3 },
    { transactionId: 'other', data: 4 },
  ]);
  const leased = await s.client.queue('edges').pop({ group: 'g', batch: 10 });
  t.deepEqual(
    leased.map((m) => m.data),
    [2, 3, 4],
  );
  const ackDup = (): Promise<{ status: number; body: any }> =>
    api(s, 'POST', '/api/v1/ack', {
      transactionId: 'dup',
      partitionId: m0!.partitionId,
      consumerGroup: 'g',
      status: 'completed',
      leaseId: leased[0]!.leaseId,
    });
  // The one in the lease (not the acked one below the cursor), lowest open first.
  const a1 = await ackDup();
  t.is(a1.body.result, 'acked');
  t.is(a1.body.offset, leased[0]!.offset);
  const a2 = await ackDup();
  t.is(a2.body.result, 'acked');
  t.is(a2.body.offset, leased[1]!.offset);
  const a3 = await ackDup();
  t.is(a3.body.result, 'already_acked');
  // Unresolvable, per item, never failing the batch; by id works too.
  const batch = await api(s, 'POST', '/api/v1/ack/batch', {
    consumerGroup: 'g',
    acknowledgments: [
      { transactionId: 'never-pushed', partitionId: m0!.partitionId },
      { id: leased[2]!.id, partitionId: m0!.partitionId },
      { id: '00000000-0000-7000-8000-000000000000', leaseId: leased[2]!.leaseId },
    ],
  });
  t.is(batch.status, 200);
  t.deepEqual(
    batch.body.results.map((r: { result: string }) => r.result),
    ['not_found', 'acked', 'not_found'],
  );
  t.deepEqual(await cursor(s, 'edges', 'g'), [{ committed: 3, leaseEnd: null }]);
});

test('failed counts attempts; past retryLimit the message is dead-lettered and the cursor moves on', async (t) => {
  const { s } = t.context;
  await pushN(s, 'retries', 2);
  await s.client.queue('retries').configure({ retryLimit: 2 });
  const results: string[] = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    const [m] = await s.client.queue('retries').pop({ group: 'g' });
    t.is(m!.transactionId, 'm-0');
    const [r] = await s.client.ack(m!, 'failed', { error: `boom ${attempt}` });
    results.push(`${r!.result}:${r!.attempts}`);
  }
  t.deepEqual(results, ['released:1', 'released:2', 'dead_lettered:3']);
  const [next] = await s.client.queue('retries').pop({ group: 'g' });
  t.is(next!.transactionId, 'm-1');
  const dl = await s.sql.query(
    "SELECT transaction_id, error, attempts, convert_from(payload, 'UTF8') AS payload FROM queen.log_dead_letters WHERE consumer_group = 'g' AND partition_id = $1",
    [next!.partitionId],
  );
  t.deepEqual(dl.rows, [{ transaction_id: 'm-0', error: 'boom 3', attempts: 3, payload: JSON.stringify({ i: 0, prefix: 'm' }) }]);
  // dlq status dead-letters at once (the optimistic ack hands it to the locked one: two statements, one transaction).
  const handed = () => s.metrics.counter('queen_ack_locked_retries_total', '', 'reason').get('dead_letter');
  const before = handed();
  const [r] = await s.client.ack(next!, 'dlq', { error: 'poison' });
  t.is(r!.result, 'dead_lettered');
  t.true(handed() >= before + 1);
  t.deepEqual(await cursor(s, 'retries', 'g'), [{ committed: 1, leaseEnd: null }]);
});

test('subscriptionMode=new skips history; from takes an ISO time; all reads everything', async (t) => {
  const { s } = t.context;
  await pushN(s, 'subs', 5, 'p0', 'old');
  t.deepEqual(await s.client.queue('subs').pop({ group: 'fresh', subscriptionMode: 'new' }), []);
  await pushN(s, 'subs', 2, 'p0', 'new');
  // A partition created after the group subscribed is all new.
  await pushN(s, 'subs', 1, 'p1', 'late');
  const fresh = await s.client.queue('subs').pop({ group: 'fresh', partition: 'p0', batch: 10 });
  t.deepEqual(
    fresh.map((m) => m.transactionId),
    ['new-0', 'new-1'],
  );
  const late = await s.client.queue('subs').pop({ group: 'fresh', partition: 'p1', batch: 10 });
  t.deepEqual(
    late.map((m) => m.transactionId),
    ['late-0'],
  );
  const all = await s.client.queue('subs').pop({ group: 'everything', partition: 'p0', batch: 10 });
  t.is(all.length, 7);
  const future = await s.client
    .queue('subs')
    .pop({ group: 'later', subscriptionMode: 'from', subscriptionFrom: new Date(Date.now() + 3_600_000) });
  t.deepEqual(future, []);
});

test('long poll is woken by a push (event-driven), and answers 204 at its timeout', async (t) => {
  const { s } = t.context;
  await s.client.queue('poll').configure({});
  const wakes = s.metrics.counter('queen_pop_wakes_total', '');
  const before = wakes.get('local');
  const started = Date.now();
  // The safety re-check is 10 minutes and the timeout 5: only a wake-up can answer before.
  const waiting = s.client.queue('poll').pop({ group: 'g', wait: true, timeoutMs: 300_000 });
  await waitUntilWaiting(s, 1, 'poll');
  await pushN(s, 'poll', 1);
  const got = await waiting;
  t.is(got.length, 1);
  // Nothing but a wake-up can answer this early (re-check 10 min, timeout 5 min).
  t.true(Date.now() - started < 100_000);
  // Other tests' long polls share the counter: at least this wake was counted.
  t.true(wakes.get('local') >= before + 1);

  const r = await api(s, 'GET', '/api/v1/pop/queue/poll?consumerGroup=other-empty-group&subscriptionMode=new&wait=true&timeout=150');
  t.is(r.status, 204);
});

test('a long poll on another broker is woken through LISTEN/NOTIFY', async (t) => {
  const { s } = t.context;
  const other = await startHttpStack('read_path_b', { database: { db: s.db, sql: s.sql }, readRecheckMs: 600_000 });
  try {
    await s.client.queue('cross').configure({});
    const waiting = other.client.queue('cross').pop({ group: 'g', wait: true, timeoutMs: 300_000 });
    await waitUntilWaiting(other, 1, 'cross');
    await pushN(s, 'cross', 1);
    t.is((await waiting).length, 1);
    t.is(other.metrics.counter('queen_pop_wakes_total', '').get('notify'), 1);
  } finally {
    await other.stop();
  }
});

test('a failed ack wakes a long poll waiting for the released message', async (t) => {
  const { s } = t.context;
  await pushN(s, 'release', 1);
  const [m] = await s.client.queue('release').pop({ group: 'g' });
  const waiting = s.client.queue('release').pop({ group: 'g', wait: true, timeoutMs: 300_000 });
  await waitUntilWaiting(s, 1, 'release');
  await s.client.ack(m!, 'retry');
  const [again] = await waiting;
  t.is(again!.offset, m!.offset);
});

test('a completed ack wakes a long poll waiting behind the lease it ends', async (t) => {
  const { s } = t.context;
  await pushN(s, 'handoff', 2);
  const [m] = await s.client.queue('handoff').pop({ group: 'g', batch: 1 });
  // The partition is leased to the first consumer: this one finds nothing and parks.
  const waiting = s.client.queue('handoff').pop({ group: 'g', batch: 10, wait: true, timeoutMs: 60_000 });
  await waitUntilWaiting(s, 1, 'handoff');
  const wakes = s.metrics.counter('queen_pop_wakes_total', '').get('local');
  await s.client.ack(m!);
  // The re-check is 10 minutes: only the ack's wake-up can hand it the next message before its timeout.
  const next = await waiting;
  t.deepEqual(
    next.map((x) => x.offset),
    [m!.offset + 1],
  );
  t.true(s.metrics.counter('queen_pop_wakes_total', '').get('local') >= wakes + 1);
});

test('an ack inside a transaction wakes a long poll waiting behind the lease it ends', async (t) => {
  const { s } = t.context;
  await pushN(s, 'handoff-tx', 2);
  const [m] = await s.client.queue('handoff-tx').pop({ group: 'g', batch: 1 });
  const waiting = s.client.queue('handoff-tx').pop({ group: 'g', batch: 10, wait: true, timeoutMs: 60_000 });
  await waitUntilWaiting(s, 1, 'handoff-tx');
  await s.client.transaction().ack(m!).commit();
  const next = await waiting;
  t.deepEqual(
    next.map((x) => x.offset),
    [m!.offset + 1],
  );
});

test('transaction: ack + push commit together; a stale lease rolls everything back (409)', async (t) => {
  const { s } = t.context;
  await pushN(s, 'tx-in', 2);
  const [m] = await s.client.queue('tx-in').pop({ group: 'g' });
  const r = await s.client
    .transaction()
    .ack(m!)
    .queue('tx-out')
    .partition('o')
    .push([{ transactionId: 'out-0', data: 'x' }])
    .commit();
  t.is(r.pushes[0]!.status, 'queued');
  t.is(r.acks[0]!.result, 'acked');
  // A second consumer's view: the ack settled, the push is there.
  const out = await s.client.queue('tx-out').pop({ group: 'g' });
  t.deepEqual(
    out.map((x) => x.transactionId),
    ['out-0'],
  );

  const [m1] = await s.client.queue('tx-in').pop({ group: 'g', leaseSeconds: 300 });
  await s.sql.query("UPDATE queen.log_cursors SET lease_expires_at = now() - interval '1 second' WHERE lease_id = $1", [m1!.leaseId]);
  const [taken] = await s.client.queue('tx-in').pop({ group: 'g' });
  t.is(taken!.offset, m1!.offset);
  const err = await t.throwsAsync(
    s.client
      .transaction()
      .ack(m1!)
      .queue('tx-out')
      .partition('o')
      .push([{ transactionId: 'out-1', data: 'y' }])
      .commit(),
    { instanceOf: QueenHttpError },
  );
  t.is(err.status, 409);
  const written = await s.sql.query(
    "SELECT count(*)::int AS n FROM queen.log_txns t JOIN queen.log_partitions lp ON lp.id = t.partition_id JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'tx-out'",
  );
  t.is(written.rows[0].n, 1);
  // Pushes inside a transaction get the same dedup verdicts as /push.
  const dup = await s.client
    .transaction()
    .ack(taken!)
    .queue('tx-out')
    .partition('o')
    .push([{ transactionId: 'out-0', data: 'again' }])
    .commit();
  t.is(dup.pushes[0]!.status, 'duplicate');
  t.is(dup.pushes[0]!.id, r.pushes[0]!.id);
});

test('bad input is a 400 naming the problem, and changes nothing', async (t) => {
  const { s } = t.context;
  await pushN(s, 'bad', 2);
  const [m] = await s.client.queue('bad').pop({ group: 'g' });
  const state = await cursor(s, 'bad', 'g');
  const cases: [string, 'GET' | 'POST', string, unknown, RegExp][] = [
    [
      'unknown status',
      'POST',
      '/api/v1/ack',
      { transactionId: m!.transactionId, partitionId: m!.partitionId, consumerGroup: 'g', status: 'done' },
      /status/,
    ],
    [
      'unknown status in a batch',
      'POST',
      '/api/v1/ack/batch',
      {
        consumerGroup: 'g',
        acknowledgments: [
          { transactionId: m!.transactionId, partitionId: m!.partitionId },
          { transactionId: 'x', partitionId: 1, status: 'ok' },
        ],
      },
      /status/,
    ],
    ['bad lease id', 'POST', '/api/v1/ack', { transactionId: m!.transactionId, leaseId: 'nope', status: 'completed' }, /leaseId/],
    ['neither id nor transactionId', 'POST', '/api/v1/ack', { partitionId: m!.partitionId, status: 'completed' }, /transactionId or id/],
    ['batch 0', 'GET', '/api/v1/pop/queue/bad?consumerGroup=g&batch=0', undefined, /batch/],
    ['batch over the limit', 'GET', '/api/v1/pop/queue/bad?consumerGroup=g&batch=10001', undefined, /batch/],
    ['batch not a number', 'GET', '/api/v1/pop/queue/bad?consumerGroup=g&batch=ten', undefined, /batch/],
    [
      'bad ISO time',
      'GET',
      '/api/v1/pop/queue/bad?consumerGroup=h&subscriptionMode=from&subscriptionFrom=yesterday',
      undefined,
      /subscriptionFrom/,
    ],
    ['bad subscription mode', 'GET', '/api/v1/pop/queue/bad?consumerGroup=h&subscriptionMode=latest', undefined, /subscriptionMode/],
    ['unknown parameter', 'GET', '/api/v1/pop/queue/bad?consumerGroup=g&batchSize=5', undefined, /batchSize/],
    ['bad wait', 'GET', '/api/v1/pop/queue/bad?consumerGroup=g&wait=maybe', undefined, /wait/],
    ['transaction with an unknown op', 'POST', '/api/v1/transaction', { operations: [{ type: 'delete' }] }, /type/],
    [
      'transaction with a bad push item',
      'POST',
      '/api/v1/transaction',
      {
        operations: [
          { type: 'ack', transactionId: m!.transactionId, partitionId: m!.partitionId, consumerGroup: 'g' },
          { type: 'push', items: [{ queue: 'bad out', payload: 1 }] },
        ],
      },
      /queue/,
    ],
  ];
  for (const [name, method, path, body, field] of cases) {
    const r = await api(s, method, path, body);
    t.is(r.status, 400, name);
    t.regex(`${r.body.message} ${r.body.field ?? ''}`, field, name);
  }
  t.deepEqual(await cursor(s, 'bad', 'g'), state);
  t.is((await s.sql.query("SELECT count(*)::int AS n FROM queen.log_groups WHERE consumer_group = 'h'")).rows[0].n, 0);
});

/**
 * Until n long polls (of `queue`, when given) have run their query, found
 * nothing and wait for a wake (a push now can only reach them by one). Tests
 * of a file run concurrently: a count over every queue can be another
 * test's waiter.
 */
async function waitUntilWaiting(s: HttpStack, n: number, queue?: string): Promise<void> {
  const parked = () => (queue === undefined ? s.read.waiters.parked : s.read.waiters.parkedOn(queue));
  await waitFor(`a long poll${queue === undefined ? '' : ` on ${queue}`} to be waiting`, () => parked() >= n, 10_000, 5);
}

test('a cursor below log_start skips to it, says so in the pop response and counts it', async (t) => {
  const { s } = t.context;
  await pushN(s, 'start', 6);
  const [m] = await s.client.queue('start').pop({ group: 'g' });
  await s.client.ack(m!);
  // What retention does: raise the first retained offset (and drop what is below).
  await s.sql.query('UPDATE queen.log_partitions SET log_start = 4 WHERE id = $1', [m!.partitionId]);
  await s.sql.query('DELETE FROM queen.log_segments WHERE partition_id = $1 AND end_offset < 4', [m!.partitionId]);
  const skips = s.metrics.counter('queen_cursor_log_start_skips_total', '');
  const before = skips.get();
  const r = await api(s, 'GET', '/api/v1/pop/queue/start?consumerGroup=g&batch=10');
  t.is(r.status, 200);
  t.is(r.body.skipped, 3);
  t.deepEqual(
    r.body.messages.map((x: { offset: number }) => x.offset),
    [4, 5],
  );
  t.is(skips.get(), before + 3);
  // A new group starts at log_start too.
  const fresh = await s.client.queue('start').pop({ group: 'new-group', batch: 10 });
  t.deepEqual(
    fresh.map((x) => x.offset),
    [4, 5],
  );

  // A skip that leaves nothing to deliver still says so: the empty answer (204) carries it in a header.
  await s.client
    .queue('skip-empty')
    .partition('p')
    .push([
      { transactionId: 'e0', data: 0 },
      { transactionId: 'e1', data: 1 },
    ]);
  const [e0] = await s.client.queue('skip-empty').pop({ group: 'g' });
  const k = { partitionId: e0!.partitionId };
  t.is(e0!.offset, 0);
  await s.client.ack(e0!);
  // Retention removes the segment [0, 1]: offset 1 was never delivered to g.
  await s.sql.query('UPDATE queen.log_partitions SET log_start = 2 WHERE id = $1', [k.partitionId]);
  await s.sql.query('DELETE FROM queen.log_segments WHERE partition_id = $1', [k.partitionId]);
  const before2 = skips.get();
  const res = await fetch(`${s.api.url}/api/v1/pop/queue/skip-empty?consumerGroup=g&batch=10`);
  t.is(res.status, 204);
  t.is(res.headers.get('x-queen-skipped'), '1');
  t.is(skips.get(), before2 + 1);
  // The client reports a skip through onSkipped.
  await s.client
    .queue('skip-empty')
    .partition('p')
    .push([{ transactionId: 'e2', data: 2 }]);
  await s.client
    .queue('skip-empty')
    .partition('p')
    .push([{ transactionId: 'e3', data: 3 }]);
  await s.sql.query('UPDATE queen.log_partitions SET log_start = 3 WHERE id = $1', [k.partitionId]);
  await s.sql.query('DELETE FROM queen.log_segments WHERE partition_id = $1 AND end_offset < 3', [k.partitionId]);
  const seen: [number, string][] = [];
  const got = await s.client.queue('skip-empty').pop({ group: 'g', batch: 10, onSkipped: (n, p) => seen.push([n, p]) });
  t.deepEqual(
    got.map((x) => x.offset),
    [3],
  );
  t.deepEqual(seen, [[1, 'p']]);
});

test('browse decodes a span; by transactionId finds the message; the SQL decode function agrees', async (t) => {
  const { s } = t.context;
  await s.client
    .queue('browse')
    .partition('p')
    .push([
      { transactionId: 'b0', data: { a: 1 }, traceContext: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      { transactionId: 'b1', data: 'two' },
    ]);
  await s.client
    .queue('browse')
    .partition('p')
    .push([{ transactionId: 'b2', data: [3] }]);
  const r = await api(s, 'GET', '/api/v1/messages?queue=browse&partition=p&from=1&limit=5');
  t.is(r.status, 200);
  t.deepEqual(
    r.body.messages.map((m: { offset: number; data: unknown }) => [m.offset, m.data]),
    [
      [1, 'two'],
      [2, [3]],
    ],
  );
  t.is(r.body.next, null);
  const one = await api(s, 'GET', `/api/v1/messages/${r.body.partitionId}/b0`);
  t.is(one.status, 200);
  t.deepEqual(
    [one.body.offset, one.body.data, one.body.traceContext],
    [0, { a: 1 }, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
  );
  t.is((await api(s, 'GET', `/api/v1/messages/${r.body.partitionId}/nope`)).status, 404);
  t.is((await api(s, 'GET', '/api/v1/messages?queue=browse&partition=missing')).status, 404);
  t.is((await api(s, 'GET', '/api/v1/messages?queue=browse&partition=p&limit=0')).status, 400);
  // psql users: queen.log_read_v1 decodes the same frames.
  const sql = await s.sql.query(
    "SELECT msg_offset, message_id::text AS id, transaction_id, trace_context, convert_from(payload, 'UTF8') AS payload FROM queen.log_read_v1($1, 0, 2)",
    [r.body.partitionId],
  );
  t.deepEqual(
    sql.rows.map((x) => [Number(x.msg_offset), x.transaction_id, x.payload]),
    [
      [0, 'b0', '{"a":1}'],
      [1, 'b1', '"two"'],
      [2, 'b2', '[3]'],
    ],
  );
  t.is(sql.rows[0].trace_context, one.body.traceContext);
  t.is(sql.rows[0].id, one.body.id);
});

test('dead letters: listed with their payload and error; requeue pushes a copy once', async (t) => {
  const { s } = t.context;
  await pushN(s, 'dlq', 2);
  const [m] = await s.client.queue('dlq').pop({ group: 'g' });
  await s.client.ack(m!, 'dlq', { error: 'cannot parse' });
  const list = await api(s, 'GET', '/api/v1/dlq?queue=dlq&consumerGroup=g');
  t.is(list.status, 200);
  t.is(list.body.deadLetters.length, 1);
  const d = list.body.deadLetters[0];
  t.like(d, {
    queue: 'dlq',
    partition: 'p0',
    consumerGroup: 'g',
    offset: 0,
    transactionId: 'm-0',
    data: { i: 0, prefix: 'm' },
    error: 'cannot parse',
    requeuedAt: null,
  });
  const rq = await api(s, 'POST', `/api/v1/dlq/${d.id}/requeue`);
  t.is(rq.status, 200);
  t.is(rq.body.push.status, 'queued');
  t.is(rq.body.push.transaction_id, `m-0#requeue-${d.id}`);
  t.is((await api(s, 'POST', `/api/v1/dlq/${d.id}/requeue`)).status, 409);
  t.is((await api(s, 'POST', '/api/v1/dlq/999999/requeue')).status, 404);
  // The group gets m-1, then the requeued copy.
  const rest = await s.client.queue('dlq').pop({ group: 'g', batch: 10 });
  t.deepEqual(
    rest.map((x) => x.transactionId),
    ['m-1', `m-0#requeue-${d.id}`],
  );
  t.deepEqual(rest[1]!.data, { i: 0, prefix: 'm' });
});

test('client consume(): acks on success, fails on throw (redelivered), renews the lease of a slow handler, stops on abort', async (t) => {
  const { s } = t.context;
  await pushN(s, 'consume', 30);
  const handled: string[] = [];
  const stop = new AbortController();
  let failedOnce = false;
  let slowLease: { leaseId: string; firstExpiry: number } | undefined;
  const done = s.client
    .queue('consume')
    .group('workers')
    .batch(4)
    .concurrency(2)
    .consume(
      async (m) => {
        if (m.transactionId === 'm-7' && !failedOnce) {
          failedOnce = true;
          throw new Error('transient');
        }
        if (m.transactionId === 'm-12' && !slowLease) {
          // Outlive the 3 s lease; only renewal keeps it.
          slowLease = { leaseId: m.leaseId!, firstExpiry: Date.parse(m.leaseExpiresAt!) };
          await waitFor(
            'the lease to be renewed past its first expiry',
            async () => {
              const r = await s.sql.query('SELECT lease_expires_at FROM queen.log_cursors WHERE lease_id = $1', [m.leaseId]);
              return r.rowCount === 1 && Date.now() > slowLease!.firstExpiry + 1_500 && r.rows[0].lease_expires_at.getTime() > Date.now();
            },
            20_000,
            50,
          );
        }
        handled.push(m.transactionId);
        if (new Set(handled).size === 30) stop.abort();
      },
      { signal: stop.signal, leaseSeconds: 3, timeoutMs: 2_000 },
    );
  await done;
  t.is(new Set(handled).size, 30);
  t.true(failedOnce);
  // m-7 was handled after its failure; m-12 exactly once (its lease held), like every other message.
  t.is(handled.filter((x) => x === 'm-7').length, 1);
  t.is(handled.filter((x) => x === 'm-12').length, 1);
  t.is(handled.length, 30);
  await waitFor('the last acks', async () => (await cursor(s, 'consume', 'workers'))[0]!.committed === 29, 10_000);
});

test('only a lease-only pop commits without waiting for its WAL flush (log_pop_v3): never a first pop, a new cursor, a skip or autoAck', async (t) => {
  const { s } = t.context;
  await pushN(s, 'async-pop', 6);
  /**
   * Runs one pop as the broker does, but inside an explicit transaction so the
   * transaction-local setting it leaves can be read before the commit.
   */
  const popCommit = async (group: string, autoAck: boolean): Promise<{ commit: string; offsets: number[] }> => {
    const c = await s.sql.connect();
    try {
      // The session's own level first (the test cluster may run with it off): what the pop leaves is then its doing.
      await c.query('SET synchronous_commit = on');
      await c.query('BEGIN');
      const r = await c.query(`SELECT span_from, span_to, skipped FROM queen.log_pop_v3($1, NULL, $2, 2, 60, $3, NULL, 'test', $4, 1000)`, [
        'async-pop',
        group,
        'all',
        autoAck,
      ]);
      const commit = (await c.query<{ v: string }>("SELECT current_setting('synchronous_commit') AS v")).rows[0]!.v;
      await c.query('COMMIT');
      // Transaction-local: the session's own setting is back once the pop's transaction ended.
      const after = (await c.query<{ v: string }>("SELECT current_setting('synchronous_commit') AS v")).rows[0]!.v;
      if (after !== 'on') throw new Error(`synchronous_commit stayed ${after} after the pop's transaction`);
      const row = r.rows[0];
      const offsets = row && row.span_from !== null ? [Number(row.span_from), Number(row.span_to)] : [];
      return { commit, offsets };
    } finally {
      await c.query('RESET synchronous_commit');
      c.release();
    }
  };
  // The group's first pop creates the group and its cursors (mode new/from would fix the start now): synchronous.
  t.deepEqual(await popCommit('async-g', false), { commit: 'on', offsets: [0, 1] });
  // Only this queue's cursors of its own group: the other tests of this file run at the same time.
  const expire = () =>
    s.sql.query(
      `UPDATE queen.log_cursors SET lease_expires_at = now() - interval '1 second'
       WHERE consumer_group = 'async-g'
         AND partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'async-pop')`,
    );
  // With the group and its cursor in place, a pop that only takes a lease: asynchronous.
  await expire();
  t.deepEqual(await popCommit('async-g', false), { commit: 'off', offsets: [0, 1] });
  // autoAck moves the cursor: synchronous.
  await expire();
  t.deepEqual(await popCommit('async-g', true), { commit: 'on', offsets: [0, 1] });
  // A pop that skips to log_start moves the cursor: synchronous.
  const pid = Number(
    (await s.sql.query(`SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'async-pop'`))
      .rows[0].id,
  );
  await s.sql.query('UPDATE queen.log_partitions SET log_start = 4 WHERE id = $1', [pid]);
  await s.sql.query('DELETE FROM queen.log_segments WHERE partition_id = $1 AND end_offset < 4', [pid]);
  t.deepEqual(await popCommit('async-g', false), { commit: 'on', offsets: [4, 5] });
  // A partition created after the group's first pop gets its cursor in the next pop: synchronous.
  await pushN(s, 'async-pop', 2, 'p1');
  await expire();
  t.is((await popCommit('async-g', false)).commit, 'on');
});
