import test from 'ava';
import type { PushItem, PushResult } from '../../src/engine/writer.js';
import { Fusion, type BundleSink } from '../../src/fusion/fusion.js';
import { BundleNotWrittenError, DatabaseError } from '../../src/errors.js';

/** A sink that records bundles and lets the test release them one by one. */
class GatedSink implements BundleSink {
  bundles: PushItem[][] = [];
  inFlightKeys = new Map<string, number>();
  maxPerKey = 0;
  private gates: (() => void)[] = [];
  fail: Error | undefined;

  async push(items: readonly PushItem[]): Promise<PushResult[]> {
    this.bundles.push([...items]);
    const keys = new Set(items.map((i) => `${i.queue}/${i.partition}`));
    for (const k of keys) {
      const n = (this.inFlightKeys.get(k) ?? 0) + 1;
      this.inFlightKeys.set(k, n);
      this.maxPerKey = Math.max(this.maxPerKey, n);
    }
    await new Promise<void>((r) => this.gates.push(r));
    for (const k of keys) this.inFlightKeys.set(k, this.inFlightKeys.get(k)! - 1);
    if (this.fail) throw this.fail;
    return items.map((i) => ({
      status: 'queued',
      id: 'x',
      transactionId: i.transactionId ?? null,
      queue: i.queue,
      partition: i.partition ?? 'Default',
      offset: 0,
    }));
  }

  async releaseAll(): Promise<void> {
    while (this.gates.length === 0) await new Promise((r) => setImmediate(r));
    for (const g of this.gates.splice(0)) g();
  }
}

const item = (partition: string, n: number, bytes = 10): PushItem => ({
  queue: 'q',
  partition,
  transactionId: `${partition}-${n}`,
  payload: Buffer.alloc(bytes),
});
const opts = { maxItems: 100, maxBytes: 1 << 20, holdMs: 0, maxInflightBytes: 1 << 20, maxConcurrentFlushes: 4 };

test('disjoint partitions fuse into one bundle; a partition is never flushed twice at once', async (t) => {
  const sink = new GatedSink();
  const f = new Fusion(sink, opts);
  await f.start();
  const a = f.submit([item('a', 1), item('b', 1), item('c', 1)]);
  await sink.releaseAll();
  t.is(sink.bundles.length, 1, 'three partitions, one bundle');
  t.is(sink.bundles[0]!.length, 3);
  await a;
  // While a's flush is in flight, more items for a wait; b goes out in another bundle.
  const p1 = f.submit([item('a', 2)]);
  while (sink.bundles.length < 2) await new Promise((r) => setImmediate(r));
  const p2 = f.submit([item('a', 3), item('b', 2)]);
  while (sink.bundles.length < 3) await new Promise((r) => setImmediate(r));
  t.deepEqual(
    sink.bundles[2]!.map((i) => i.partition),
    ['b'],
    'a is in flight, so only b is taken',
  );
  await sink.releaseAll();
  await sink.releaseAll();
  await Promise.all([p1, p2]);
  t.deepEqual(
    sink.bundles[3]!.map((i) => i.transactionId),
    ['a-3'],
  );
  t.is(sink.maxPerKey, 1, 'single-flight per partition');
  await f.stop();
});

test('bundles respect the item limit and keep per-partition arrival order', async (t) => {
  const sink = new GatedSink();
  const f = new Fusion(sink, { ...opts, maxItems: 5, maxConcurrentFlushes: 1 });
  await f.start();
  const p = f.submit(Array.from({ length: 12 }, (_, i) => item('a', i)));
  for (let i = 0; i < 3; i++) await sink.releaseAll();
  const results = await p;
  t.deepEqual(
    sink.bundles.map((b) => b.length),
    [5, 5, 2],
  );
  t.deepEqual(
    sink.bundles.flat().map((i) => i.transactionId),
    Array.from({ length: 12 }, (_, i) => `a-${i}`),
  );
  t.is(results.length, 12);
  await f.stop();
});

test('pressure and relief events track pending bytes', async (t) => {
  const sink = new GatedSink();
  const f = new Fusion(sink, { ...opts, maxInflightBytes: 100 });
  const events: string[] = [];
  f.events.on('pressure', () => events.push('pressure'));
  f.events.on('relief', () => events.push('relief'));
  await f.start();
  const p = f.submit([item('a', 1, 80), item('b', 1, 80)]);
  t.true(f.overloaded);
  await sink.releaseAll();
  await p;
  t.false(f.overloaded);
  t.deepEqual(events, ['pressure', 'relief']);
  await f.stop();
});

test('a failed bundle rejects its callers with the (retriable) error; stop drains and then refuses', async (t) => {
  const sink = new GatedSink();
  sink.fail = new DatabaseError('down', '57P01', { retriable: true });
  const f = new Fusion(sink, opts);
  await f.start();
  const p = f.submit([item('a', 1)]);
  await sink.releaseAll();
  const err = await t.throwsAsync(p, { instanceOf: DatabaseError });
  t.true(err.retriable);
  sink.fail = undefined;
  const pending = f.submit([item('b', 1)]);
  const stopping = f.stop();
  await sink.releaseAll();
  await stopping;
  t.is((await pending)[0]!.status, 'queued', 'stop() let queued work finish');
  await t.throwsAsync(f.submit([item('c', 1)]), { message: /not accepting/ });
});

/** A sink whose bundle fails unwritten whenever it holds a "poison" item, as LogWriter reports a defect or a refused bundle. */
class PoisonSink implements BundleSink {
  bundles: PushItem[][] = [];
  async push(items: readonly PushItem[]): Promise<PushResult[]> {
    this.bundles.push([...items]);
    if (items.some((i) => i.partition === 'poison')) throw new BundleNotWrittenError(new TypeError('boom'));
    return items.map((i) => ({
      status: 'queued',
      id: 'x',
      transactionId: i.transactionId ?? null,
      queue: i.queue,
      partition: i.partition ?? 'Default',
      offset: 0,
    }));
  }
}

test('a bundle that fails unwritten is pushed again per request: only the request that carried the poison fails', async (t) => {
  const sink = new PoisonSink();
  const f = new Fusion(sink, opts);
  await f.start();
  // Same turn: one bundle of three requests.
  const good1 = f.submit([item('a', 1), item('b', 1)]);
  const bad = f.submit([item('c', 1), item('poison', 1)]);
  const good2 = f.submit([item('d', 1)]);
  t.deepEqual(
    (await good1).map((r) => r.status),
    ['queued', 'queued'],
  );
  t.deepEqual(
    (await good2).map((r) => r.status),
    ['queued'],
  );
  await t.throwsAsync(bad, { instanceOf: BundleNotWrittenError });
  t.is(sink.bundles[0]!.length, 5, 'the three requests were first fused into one bundle');
  t.deepEqual(
    sink.bundles.slice(1).map((b) => b.map((i) => i.partition)),
    [['a', 'b'], ['c', 'poison'], ['d']],
    'then pushed apart, one request at a time',
  );
  await f.stop();
});

test('any other bundle failure still fails every request of the bundle (it may have been written)', async (t) => {
  const sink = new GatedSink();
  sink.fail = new DatabaseError('connection lost', '08006', { retriable: true });
  const f = new Fusion(sink, opts);
  await f.start();
  const a = f.submit([item('a', 1)]);
  const b = f.submit([item('b', 1)]);
  await sink.releaseAll();
  await t.throwsAsync(a, { instanceOf: DatabaseError });
  await t.throwsAsync(b, { instanceOf: DatabaseError });
  t.is(sink.bundles.length, 1, 'not pushed again');
  await f.stop();
});

test('past the key cache (more than 65 536 partitions) a partition stays single-flight and in arrival order', async (t) => {
  // The fusion keeps one key string per (queue, partition) in a bounded cache
  // that starts over when full: the same pair must still map to one queue.
  const bundles: PushItem[][] = [];
  const inFlight = new Map<string, number>();
  let maxPerKey = 0;
  const sink: BundleSink = {
    async push(items) {
      bundles.push([...items]);
      const keys = new Set(items.map((i) => `${i.queue}/${i.partition}`));
      for (const k of keys) {
        const n = (inFlight.get(k) ?? 0) + 1;
        inFlight.set(k, n);
        maxPerKey = Math.max(maxPerKey, n);
      }
      await new Promise((r) => setImmediate(r));
      for (const k of keys) inFlight.set(k, inFlight.get(k)! - 1);
      return items.map((i) => ({
        status: 'queued',
        id: 'x',
        transactionId: i.transactionId ?? null,
        queue: i.queue,
        partition: i.partition!,
        offset: 0,
      }));
    },
  };
  const f = new Fusion(sink, { ...opts, maxItems: 500, maxConcurrentFlushes: 4, maxInflightBytes: 1 << 30 });
  await f.start();
  const submits: Promise<PushResult[]>[] = [];
  let hot = 0;
  for (let chunk = 0; chunk < 70; chunk++) {
    const items = Array.from({ length: 1_000 }, (_, i) => item(`p-${chunk * 1_000 + i}`, 0));
    for (let k = 0; k < 5; k++) items.splice(k * 200, 0, item('hot', hot++));
    submits.push(f.submit(items));
    await new Promise((r) => setImmediate(r));
  }
  const results = (await Promise.all(submits)).flat();
  t.is(results.length, 70 * 1_005);
  t.true(results.every((r) => r.status === 'queued'));
  t.deepEqual(
    bundles
      .flat()
      .filter((i) => i.partition === 'hot')
      .map((i) => i.transactionId),
    Array.from({ length: hot }, (_, n) => `hot-${n}`),
    'the hot partition in arrival order',
  );
  t.is(maxPerKey, 1, 'single-flight per partition');
  await f.stop();
});
