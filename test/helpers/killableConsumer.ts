/**
 * A consumer as its own OS process, for tests that SIGKILL it mid-batch.
 * Env: QUEEN_URL, QUEUE, GROUP, MODE = "ack" (client.consume: ack after the
 * handler) or "pipeline" (pop, then one /transaction that acks the batch and
 * pushes one message per input to OUT_QUEUE). Prints "handled <txn>" per
 * message it handled, "committed <n>" per pipeline transaction.
 */
import { Queen } from '../../src/client/index.js';

const env = process.env;
const client = new Queen({ url: env.QUEEN_URL!, retries: 50, baseDelayMs: 20, maxDelayMs: 200 });
const queue = env.QUEUE!;
const group = env.GROUP!;

if (env.MODE === 'ack') {
  await client
    .queue(queue)
    .group(group)
    .batch(10)
    .consume(
      async (m) => {
        process.stdout.write(`handled ${m.transactionId}\n`);
      },
      { leaseSeconds: 1, timeoutMs: 1_000 },
    );
} else {
  for (;;) {
    const msgs = await client.queue(queue).pop({ group, batch: 7, wait: true, timeoutMs: 1_000, leaseSeconds: 1 });
    if (msgs.length === 0) continue;
    for (const m of msgs) process.stdout.write(`handled ${m.transactionId}\n`);
    try {
      await client
        .transaction()
        .ack(msgs)
        .queue(env.OUT_QUEUE!)
        .push(msgs.map((m) => ({ transactionId: `out-${m.transactionId}-${Math.random()}`, data: m.data })))
        .commit();
      process.stdout.write(`committed ${msgs.length}\n`);
    } catch {
      // 409: the lease expired and another consumer has the batch; skip it.
    }
  }
}
