import test from 'ava';
import type { LogEngine, PartitionInfo } from '../../src/engine/logEngine.js';
import { PartitionDirectory } from '../../src/engine/partitionDirectory.js';

/** provision() as SQL answers it: one row per pair, ids in first-seen order; every call recorded. */
function fakeEngine(): { engine: LogEngine; calls: string[][] } {
  const ids = new Map<string, number>();
  const calls: string[][] = [];
  const engine = {
    provision: (pairs: { queue: string; partition: string }[]): Promise<PartitionInfo[]> => {
      calls.push(pairs.map((p) => `${p.queue}/${p.partition}`));
      return Promise.resolve(
        pairs.map((p) => {
          const k = `${p.queue}/${p.partition}`;
          if (!ids.has(k)) ids.set(k, ids.size + 1);
          return { queue: p.queue, partition: p.partition, partitionId: ids.get(k)!, windowSeconds: 60 };
        }),
      );
    },
  } as unknown as LogEngine;
  return { engine, calls };
}

const it = (queue: string, partition: string) => ({ queue, partition });

test('resolveEach answers every item in order, runs and repeats included, provisioning each missing partition once', async (t) => {
  const { engine, calls } = fakeEngine();
  let now = 1_000;
  const dir = new PartitionDirectory(engine, 30_000, () => now);
  // Equal names in distinct string objects (as records decode them) must still be one partition.
  const a2 = Buffer.from('a').toString();
  const items = [it('q', 'a'), it('q', a2), it('q', 'b'), it('q', 'a'), it('r', 'a'), it('q', 'b')];
  const infos = await dir.resolveEach(items);
  t.deepEqual(
    infos.map((i) => `${i.queue}/${i.partition}`),
    items.map((i) => `${i.queue}/${i.partition}`),
  );
  t.is(infos[0]!.partitionId, infos[3]!.partitionId);
  t.not(infos[0]!.partitionId, infos[4]!.partitionId, 'the same partition name in another queue is another partition');
  t.deepEqual(calls, [['q/a', 'q/b', 'r/a']]);

  // Memoised: no SQL until the TTL passes; then only what is asked again.
  await dir.resolveEach([it('q', 'a'), it('q', 'b')]);
  t.is(calls.length, 1);
  now += 30_001;
  const again = await dir.resolveEach([it('q', 'b'), it('q', 'b'), it('q', 'c')]);
  t.deepEqual(calls[1], ['q/b', 'q/c']);
  t.deepEqual(
    again.map((i) => i.partitionId),
    [infos[2]!.partitionId, infos[2]!.partitionId, 4],
  );
});

test('a push result refreshes its partition: a partition pushed to within every TTL is never provisioned again', async (t) => {
  const { engine, calls } = fakeEngine();
  let now = 1_000;
  const dir = new PartitionDirectory(engine, 30_000, () => now);
  const [a] = await dir.resolveEach([it('q', 'a'), it('q', 'b')]);
  for (let k = 0; k < 5; k++) {
    now += 20_000;
    dir.noteWindow(a!.partitionId, 60);
  }
  // 100 s after the provisioning: 'a' was refreshed 20 s ago, 'b' never.
  await dir.resolveEach([it('q', 'a'), it('q', 'b')]);
  t.deepEqual(calls, [['q/a', 'q/b'], ['q/b']]);
  // A window the push read replaces the memoised one.
  dir.noteWindow(a!.partitionId, 7);
  t.is((await dir.resolveEach([it('q', 'a')]))[0]!.windowSeconds, 7);
  t.is(calls.length, 2);
});

test('past its cap the memo evicts expired entries, then the earliest provisioned, and keeps the rest', async (t) => {
  const { engine, calls } = fakeEngine();
  let now = 1_000;
  const dir = new PartitionDirectory(engine, 30_000, () => now, 100);
  const names = (from: number, n: number) => Array.from({ length: n }, (_, k) => it('q', `p${from + k}`));
  await dir.resolveEach(names(0, 60));
  now += 20_000;
  await dir.resolveEach(names(60, 40));
  t.is(dir.size, 100);
  // p0..p59 expire; p60..p99 stay fresh. Ten new ones overflow the cap:
  // the expired go, the fresh stay.
  now += 15_000;
  await dir.resolveEach(names(100, 10));
  t.is(dir.size, 50);
  await dir.resolveEach(names(60, 40));
  t.is(calls.length, 3, 'the fresh entries were kept');
  // Nothing expired: an overflow evicts the earliest provisioned down to 90 % of the cap.
  await dir.resolveEach(names(110, 60));
  t.is(dir.size, 90);
  const before = calls.length;
  await dir.resolveEach(names(110, 60));
  t.is(calls.length, before, 'the newest were kept');
  await dir.resolveEach(names(60, 1));
  t.is(calls.length, before + 1, 'the earliest provisioned was evicted');
});
