import test from 'ava';
import { PartitionLane } from '../../src/ingress/partitionLane.js';

interface Chunk {
  name: string;
  messages: number[];
}

const chunk = (name: string, records: number): Chunk => ({ name, messages: Array.from({ length: records }, (_, i) => i) });

/** A lane whose steps the test finishes by hand; records what ran and what settled. */
function gatedLane(limit: number) {
  const ran: string[][] = [];
  const settled: { names: string[]; done: boolean }[] = [];
  const gates: ((result: boolean | Error) => void)[] = [];
  const lane = new PartitionLane<Chunk>(
    limit,
    (chunks) => {
      ran.push(chunks.map((c) => c.name));
      return new Promise<boolean>((resolve, reject) => gates.push((r) => (r instanceof Error ? reject(r) : resolve(r))));
    },
    (chunks, done) => settled.push({ names: chunks.map((c) => c.name), done }),
  );
  return {
    lane,
    ran,
    settled,
    async steps(n: number) {
      while (ran.length < n) await new Promise((r) => setImmediate(r));
    },
    async finish(result: boolean | Error = true) {
      while (gates.length === 0) await new Promise((r) => setImmediate(r));
      gates.shift()!(result);
    },
  };
}

test('chunks that queue behind a running step go together in the next one, in order, up to the record limit', async (t) => {
  const g = gatedLane(10);
  g.lane.push(chunk('a', 4));
  await g.steps(1);
  g.lane.push(chunk('b', 3));
  g.lane.push(chunk('c', 7));
  g.lane.push(chunk('d', 4));
  g.lane.push(chunk('e', 12));
  t.deepEqual(g.ran, [['a']], 'nothing else starts while a step runs');
  t.is(g.lane.pending, 5);
  t.is(g.lane.pendingRecords, 30, 'records of every unsettled chunk, the running one included');
  await g.finish();
  await g.steps(2);
  t.deepEqual(g.ran[1], ['b', 'c'], 'b + c = 10 records fit; d would make 14');
  t.is(g.lane.pendingRecords, 26, "a's 4 records settled");
  await g.finish();
  await g.steps(3);
  t.deepEqual(g.ran[2], ['d'], 'd + e would make 16');
  await g.finish();
  await g.steps(4);
  t.deepEqual(g.ran[3], ['e'], 'a chunk larger than the limit still runs, alone');
  await g.finish();
  t.true(await g.lane.quiet());
  t.is(g.lane.pending, 0);
  t.is(g.lane.pendingRecords, 0);
  t.false(g.lane.broken);
  t.deepEqual(
    g.settled,
    [
      { names: ['a'], done: true },
      { names: ['b', 'c'], done: true },
      { names: ['d'], done: true },
      { names: ['e'], done: true },
    ],
    'each step settles its own chunks once, in order',
  );
});

test('a step that does not finish breaks the lane: later chunks settle without running', async (t) => {
  const g = gatedLane(100);
  g.lane.push(chunk('a', 1));
  await g.steps(1);
  g.lane.push(chunk('b', 1));
  await g.finish(false);
  t.false(await g.lane.quiet());
  t.true(g.lane.broken);
  g.lane.push(chunk('c', 1));
  t.false(await g.lane.quiet());
  t.deepEqual(g.ran, [['a']], 'nothing after the abandoned step is run');
  t.deepEqual(g.settled, [
    { names: ['a'], done: false },
    { names: ['b'], done: false },
    { names: ['c'], done: false },
  ]);
  t.is(g.lane.pending, 0);
});

test('a step whose run rejects counts as not finished and breaks the lane', async (t) => {
  const g = gatedLane(100);
  g.lane.push(chunk('a', 1));
  await g.finish(new Error('boom'));
  t.false(await g.lane.quiet());
  t.true(g.lane.broken);
  t.deepEqual(g.settled, [{ names: ['a'], done: false }]);
});

test('an idle lane runs a pushed chunk at once and alone', async (t) => {
  const g = gatedLane(100);
  g.lane.push(chunk('a', 3));
  await g.finish();
  t.true(await g.lane.quiet());
  g.lane.push(chunk('b', 3));
  await g.steps(2);
  t.deepEqual(g.ran, [['a'], ['b']]);
  await g.finish();
  t.true(await g.lane.quiet());
});
