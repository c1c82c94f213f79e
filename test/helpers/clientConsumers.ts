/**
 * The sources of the consumer projects the pack test (test/integration/
 * packages.test.ts) compiles against the installed @queen-ingress/client
 * tarball. They are text, not modules of this repository: the package only
 * resolves inside the scratch project the test installs it into. Each is
 * written once and saved twice, as .mts (an ES module importer) and .cts (a
 * CommonJS one): under `module: nodenext` the extension alone picks the
 * format, so both formats are checked against the same calls.
 */

/** Compiler options every consumer project shares: what a strict Node project sets. */
export const CONSUMER_OPTIONS = {
  target: 'ES2022',
  module: 'NodeNext',
  moduleResolution: 'NodeNext',
  strict: true,
  // false: the package's own .d.ts files are checked too. With true, a name
  // they use that the project does not declare (AbortSignal without
  // @types/node or DOM) silently becomes `any` instead of failing.
  skipLibCheck: false,
  types: ['node'],
} as const;

/** Right and wrong calls of the public API; tsc must accept the first and refuse each @ts-expect-error. */
export const TYPE_CHECK = `import { Queen, QueenHttpError, type Message, type PushOutcome, type QueueList } from '@queen-ingress/client';
const client = new Queen({ url: 'http://127.0.0.1:6632', retries: 2 });
export async function example(): Promise<string> {
  const first: PushOutcome[] = await client.queue('payments').partition('customer-42')
    .push([{ transactionId: 'order-9137-paid', data: { orderId: 9137, amount: 99.5 } }]);
  const page: QueueList = await client.listQueues({ limit: 10 });
  const popped: Message[] = await client.queue('payments').pop({ group: 'billing', signal: AbortSignal.timeout(1000) });
  await client.ack(popped, 'failed', { error: 'timeout' });
  // @ts-expect-error data is required
  await client.queue('payments').push([{ transactionId: 'x' }]);
  // @ts-expect-error transactionId is a string
  await client.queue('payments').push([{ transactionId: 42, data: 1 }]);
  // @ts-expect-error no such ack status
  await client.ack(popped, 'done');
  const status: 'queued' | 'duplicate' | 'failed' = first[0]!.status;
  return status + page.queues.length + (new QueenHttpError(400, {}, 'GET', '/').code ?? '');
}
`;

/** A call the declarations must refuse, at line 2 (error TS2322): the check above would prove nothing if any call passed. */
export const WRONG_CALL = `import { Queen } from '@queen-ingress/client';\nnew Queen({ url: 1 });\n`;

/**
 * Uses the options that need fetch and AbortSignal types, and no Node global,
 * so it compiles or fails on what the package's declarations need alone.
 */
export const NO_NODE_GLOBALS = `import { Queen } from '@queen-ingress/client';
const client = new Queen({ url: 'http://127.0.0.1:6632', fetch: globalThis.fetch });
export const popped = client.queue('payments').pop({ signal: AbortSignal.timeout(1000) });
`;

/**
 * Every call the README teaches, run against a real server: push and its
 * duplicate, pop and ack (completed, failed, redelivery), a transaction,
 * consume until aborted, timers, and an HTTP error of the build's own class.
 * Prints one JSON object. A function, not top-level await: a .cts file has
 * none. PREFIX keeps the ESM and the CJS run on their own queues.
 */
export const SCENARIO = `import { Queen, QueenHttpError } from '@queen-ingress/client';

async function main(): Promise<void> {
  const client = new Queen({ url: process.env.QUEEN_URL! });
  const p = process.env.PREFIX!;

  const payments = client.queue(p + '-payments').partition('customer-42');
  const first = await payments.push([{ transactionId: 'order-9137-paid', data: { orderId: 9137 } }]);
  const retry = await payments.push([{ transactionId: 'order-9137-paid', data: { orderId: 9137 } }]);

  const jobs = client.queue(p + '-jobs');
  await jobs.push([{ data: 1 }, { data: 2 }]);
  const popped = await jobs.pop({ group: 'g', batch: 10 });
  const acked = await client.ack(popped[0]!);
  const failed = await client.ack(popped[1]!, 'failed', { error: 'boom' });
  const again = await jobs.pop({ group: 'g', batch: 10 });
  const settled = await client.ack(again);
  const drained = await jobs.pop({ group: 'g', batch: 10 });

  await client.queue(p + '-orders').push([{ transactionId: 'o-1', data: { orderId: 1 } }]);
  const [order] = await client.queue(p + '-orders').pop({ group: 'fulfilment' });
  const txn = await client.transaction().ack(order!)
    .queue(p + '-shipments').partition('customer-42')
    .push([{ transactionId: 'ship:' + order!.transactionId, data: { order: order!.data } }])
    .commit();
  const [shipment] = await client.queue(p + '-shipments').pop({ group: 'carrier', partition: 'customer-42' });
  const ordersLeft = await client.queue(p + '-orders').pop({ group: 'fulfilment' });

  const events = client.queue(p + '-events');
  await events.push([{ data: 'a' }, { data: 'b' }, { data: 'c' }]);
  const seen: unknown[] = [];
  const stop = new AbortController();
  await events.group('workers').batch(2).consume(
    (msg) => {
      seen.push(msg.data);
      if (seen.length === 3) stop.abort();
    },
    { signal: stop.signal, timeoutMs: 5000 },
  );
  const eventsLeft = await events.pop({ group: 'workers' });

  const timer = client.timer(p + '-reminders').key('order-9137').partition('customer-42');
  const scheduled = await timer.delay('30m').payload({ orderId: 9137 }).schedule();
  const rescheduled = await timer.at(new Date(Date.now() + 3_600_000)).payload({ orderId: 9137, reminder: 2 }).schedule();
  const pending = await timer.peek();
  const listed = await client.timer(p + '-reminders').list(10);
  const cancelled = await timer.cancel();
  const gone = await timer.peek();

  let httpError: unknown = 'none';
  try {
    await client.queue(p + '-missing').get();
  } catch (err) {
    httpError = { instance: err instanceof QueenHttpError, status: err instanceof QueenHttpError ? err.status : null };
  }

  console.log(JSON.stringify({
    push: { first: first[0]!.status, retry: retry[0]!.status, sameId: retry[0]!.id === first[0]!.id },
    pop: {
      popped: popped.map((m) => m.data),
      acked: acked.map((a) => a.result),
      failed: failed.map((a) => a.result),
      again: again.map((m) => m.data),
      settled: settled.map((a) => a.result),
      drained: drained.length,
    },
    transaction: {
      pushes: txn.pushes.map((x) => x.status),
      acks: txn.acks.map((a) => a.result),
      shipment: shipment?.data,
      shipmentTxn: shipment?.transactionId,
      ordersLeft: ordersLeft.length,
    },
    consume: { seen, eventsLeft: eventsLeft.length },
    timers: {
      scheduled: scheduled.status,
      rescheduled: rescheduled.status,
      sameMessageId: rescheduled.messageId === scheduled.messageId,
      pending: pending && { status: pending.status, partition: pending.partition, payload: pending.payload },
      listed: listed.timers.map((x) => x.key),
      cancelled,
      gone,
    },
    httpError,
  }));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
`;
