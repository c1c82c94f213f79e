import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import anyTest, { type TestFn } from 'ava';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';

/**
 * Consumers killed with SIGKILL mid-batch (the broker stays up): at-least-once
 * with plain acks, exactly-once through /transaction for a consume -> push
 * pipeline whose output queue has deduplication OFF, so only the atomic
 * ack+push can keep it from doubling.
 */
interface Ctx {
  s: HttpStack;
  children: ChildProcess[];
}
const test = anyTest as TestFn<Ctx>;
const SCRIPT = fileURLToPath(new URL('../helpers/killableConsumer.js', import.meta.url));

test.before(async (t) => {
  t.context.s = await startHttpStack('read_kill');
  t.context.children = [];
});
teardownAndCheckLeaks(test, async (t) => {
  for (const c of t.context.children ?? []) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await t.context.s?.stop();
});

function consumer(t: { context: Ctx }, env: Record<string, string>): { child: ChildProcess; handled: string[]; exited: Promise<void> } {
  const child = spawn(process.execPath, [SCRIPT], {
    env: { PATH: process.env.PATH ?? '', QUEEN_URL: t.context.s.api.url, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.context.children.push(child);
  const handled: string[] = [];
  let buf = '';
  child.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.startsWith('handled ')) handled.push(line.slice(8));
    }
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return { child, handled, exited };
}

async function committed(s: HttpStack, queue: string, group: string): Promise<number> {
  const r = await s.sql.query(
    'SELECT coalesce(sum(c.committed_offset + 1), 0)::int AS n FROM queen.log_cursors c JOIN queen.log_partitions lp ON lp.id = c.partition_id JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1 AND c.consumer_group = $2',
    [queue, group],
  );
  return r.rows[0].n;
}

test('a consumer killed with SIGKILL mid-batch loses nothing (at-least-once)', async (t) => {
  const { s } = t.context;
  const N = 300;
  await s.client
    .queue('kill-ack')
    .partition('p')
    .push(Array.from({ length: N }, (_, i) => ({ transactionId: `k${i}`, data: i })));
  const handled = new Set<string>();
  let kills = 0;
  while ((await committed(s, 'kill-ack', 'g')) < N) {
    const c = consumer(t, { MODE: 'ack', QUEUE: 'kill-ack', GROUP: 'g' });
    if (kills < 3) {
      // Kill it once it handled some more messages: mid-batch, before or after an ack.
      const target = c.handled.length + 25 + kills * 7;
      await waitFor(
        'the consumer to handle messages',
        () => c.handled.length >= target || (c.child.exitCode ?? c.child.signalCode) !== null,
        60_000,
        5,
      );
      c.child.kill('SIGKILL');
      kills++;
    } else {
      await waitFor('the last consumer to settle everything', async () => (await committed(s, 'kill-ack', 'g')) >= N, 120_000, 50);
      c.child.kill('SIGKILL');
    }
    await c.exited;
    for (const h of c.handled) handled.add(h);
  }
  t.is(kills, 3);
  for (let i = 0; i < N; i++) t.true(handled.has(`k${i}`), `k${i} was never handled`);
});

test('a consume -> push pipeline through /transaction is exactly-once across SIGKILLs (dedup off)', async (t) => {
  const { s } = t.context;
  const N = 200;
  await s.client.queue('pipe-out').configure({ dedupWindowSeconds: 0 });
  await s.client
    .queue('pipe-in')
    .partition('p')
    .push(Array.from({ length: N }, (_, i) => ({ transactionId: `in${i}`, data: i })));
  const outCount = async (): Promise<number> =>
    (
      await s.sql.query(
        "SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)::int AS n FROM queen.log_txns t JOIN queen.log_partitions lp ON lp.id = t.partition_id JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'pipe-out'",
      )
    ).rows[0].n;
  let kills = 0;
  while ((await committed(s, 'pipe-in', 'g')) < N) {
    const c = consumer(t, { MODE: 'pipeline', QUEUE: 'pipe-in', GROUP: 'g', OUT_QUEUE: 'pipe-out' });
    if (kills < 4) {
      const target = c.handled.length + 20 + kills * 5;
      await waitFor(
        'the pipeline to handle messages',
        () => c.handled.length >= target || (c.child.exitCode ?? c.child.signalCode) !== null,
        60_000,
        2,
      );
      c.child.kill('SIGKILL');
      kills++;
    } else {
      await waitFor('the pipeline to finish', async () => (await committed(s, 'pipe-in', 'g')) >= N, 120_000, 50);
      c.child.kill('SIGKILL');
    }
    await c.exited;
  }
  t.is(kills, 4);
  t.is(await outCount(), N);
  // Every input produced exactly one output, with its payload.
  const out = await s.client.queue('pipe-out').pop({ group: 'check', batch: 10_000 });
  t.deepEqual(
    out.map((m) => m.data as number).sort((a, b) => a - b),
    Array.from({ length: N }, (_, i) => i),
  );
});
