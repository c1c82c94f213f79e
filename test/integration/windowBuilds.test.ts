import anyTest, { type TestFn } from 'ava';
import pg from 'pg';
import { DedupCache } from '../../src/dedup/index.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { fetchWindows, type WindowFetchOutcome } from '../../src/engine/windowFetch.js';
import { LogWriter, type PushItem } from '../../src/engine/writer.js';
import { CacheWatermarks } from '../../src/fusion/cacheWatermarks.js';
import type { LookupMode } from '../../src/fusion/lookupPlacement.js';
import { FETCH_BATCH, MAX_CONCURRENT_FETCHES, MAX_QUEUED_FETCHES, type WindowFetch } from '../../src/fusion/windowBuilds.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * Window fetches off the flush path (src/fusion/windowBuilds.ts), against
 * real PostgreSQL, with the fetch held open by a gate the test controls:
 * a partition with a short tail is pushed, on a lookup of all its items, while its window is
 * fetched, one with a long tail waits for it, and the appends made while it
 * is fetched are replayed at install, so the cache vouches the last offset
 * afterwards. Every verdict is checked.
 */

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  engines: LogEngine[];
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('windowbuilds');
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 2 }), engines: [] };
});
teardownAndCheckLeaks(test, async (t) => {
  await Promise.all(t.context.engines.map((e) => e.stop()));
  await t.context.sql?.end();
  await t.context.db?.drop();
});

/**
 * A fetch that takes its snapshot, then waits at a gate before handing it
 * over, and says when it got there: every push made meanwhile is missing
 * from the snapshot and must be replayed at install.
 */
function gatedFetch(): { fetch: WindowFetch; open: () => void; reached: Promise<void> } {
  let open!: () => void;
  let reached!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const reachedP = new Promise<void>((r) => (reached = r));
  const fetch: WindowFetch = async (pool, pids, admit, outcome) => {
    const held: [number, WindowFetchOutcome][] = [];
    await fetchWindows(pool, pids, admit, (p, o) => held.push([p, o]));
    reached();
    await gate;
    for (const [p, o] of held) outcome(p, o);
  };
  return { fetch, open, reached: reachedP };
}

/**
 * Holds the fetches of the `held` partitions (one a slot) at a gate:
 * `inSlots` resolves once every slot holds one, `open` lets them go, and a
 * test's fetch calls `pass` with each batch first.
 */
function slotHolder(held: readonly number[]) {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let entered = 0;
  let allIn!: () => void;
  const inSlots = new Promise<void>((r) => (allIn = r));
  const pass = async (ps: readonly number[]): Promise<void> => {
    if (!ps.some((p) => held.includes(p))) return;
    if (++entered === MAX_CONCURRENT_FETCHES) allIn();
    await gate;
  };
  return { open, inSlots, pass };
}

async function broker(t: { context: Ctx }, fetch?: WindowFetch, lookups?: LookupMode) {
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ connectionString: t.context.db.url, poolSize: 4, metrics });
  await engine.start();
  t.context.engines.push(engine);
  const cache = new DedupCache({ capBytes: 64 << 20 });
  const watermarks = new CacheWatermarks(cache, engine, metrics, undefined, true, fetch, lookups);
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks });
  return {
    engine,
    cache,
    writer,
    metrics,
    watermarks,
    probes: () => metrics.counter('queen_probe_run_total', '').get(),
    lookups: () => metrics.counter('queen_lookup_total', '').get(),
  };
}

const item = (queue: string, txn: string): PushItem => ({ queue, partition: 'p', transactionId: txn, payload: Buffer.from('{}') });
const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

test.serial(
  'short tail: a partition is pushed on a lookup of all its items while its window is fetched, then installs with the pushes made meanwhile and vouches its last offset',
  async (t) => {
    const q = 'short';
    const loader = await broker(t);
    await loader.writer.push(ids('old', 300).map((x) => item(q, x)));
    const gate = gatedFetch();
    const b = await broker(t, gate.fetch);
    // No entry yet: the first push starts the fetch, which stops at the gate; the tail is short, so the push goes on.
    const first = await b.writer.push([...ids('new1', 20), ...ids('old', 5)].map((x) => item(q, x)));
    await gate.reached;
    t.deepEqual(
      first.map((r) => r.status),
      [...Array<string>(20).fill('queued'), ...Array<string>(5).fill('duplicate')],
    );
    t.true(b.lookups() >= 1, 'pushed on a lookup of its items (no entry to vouch yet)');
    const second = await b.writer.push([...ids('new2', 20), ...ids('new1', 3)].map((x) => item(q, x)));
    t.deepEqual(
      second.map((r) => r.status),
      [...Array<string>(20).fill('queued'), ...Array<string>(3).fill('duplicate')],
    );
    t.true(b.cache.isFetching(await pid(t, q)), 'the window is still being fetched');
    gate.open();
    await b.watermarks.builds.idle();
    const p = await pid(t, q);
    const info = b.cache.entryInfo(p);
    t.truthy(info, 'installed');
    const last = Number((await t.context.sql.query('SELECT last_offset FROM queen.log_partitions WHERE id = $1', [p])).rows[0].last_offset);
    t.is(info!.verifiedUpto, last, 'the pushes made during the fetch were replayed');
    t.is(info!.state, 'vouching');
    const before = b.probes();
    const third = await b.writer.push([...ids('new3', 10), ...ids('new2', 2), ...ids('old', 2)].map((x) => item(q, x)));
    t.deepEqual(
      third.map((r) => r.status),
      [...Array<string>(10).fill('queued'), ...Array<string>(4).fill('duplicate')],
    );
    t.is(b.probes(), before, 'vouched: no probe');
  },
);

test.serial('long tail: a partition never compacted waits for its window instead of probing it whole', async (t) => {
  const q = 'long';
  const loader = await broker(t);
  await loader.writer.push(ids('old', 5000).map((x) => item(q, x)));
  const gate = gatedFetch();
  const b = await broker(t, gate.fetch);
  let settled = false;
  const pushed = b.writer.push([...ids('new', 10), ...ids('old', 3)].map((x) => item(q, x))).finally(() => (settled = true));
  await gate.reached;
  // The fetch is held at its gate: the push must still be waiting for it.
  await t.context.sql.query('SELECT 1');
  t.false(settled, 'the push waits for the window');
  gate.open();
  const res = await pushed;
  t.deepEqual(
    res.map((r) => r.status),
    [...Array<string>(10).fill('queued'), ...Array<string>(3).fill('duplicate')],
  );
  t.is(b.probes(), 0, 'no probe: it vouched from the fetched window');
});

test.serial(
  'a partition whose fetch waits for a slot: looked up at once with a short tail, with a long one waits and its fetch goes first; past the queue cap no build starts',
  async (t) => {
    const loader = await broker(t);
    await loader.writer.push(ids('a', 10).map((x) => item('held1', x)));
    await loader.writer.push(ids('b', 10).map((x) => item('held2', x)));
    await loader.writer.push(ids('old', 300).map((x) => item('queued', x)));
    await loader.writer.push(ids('old', 5000).map((x) => item('queuedlong', x)));
    const held = new Set([await pid(t, 'held1'), await pid(t, 'held2')]);
    const longPid = await pid(t, 'queuedlong');
    const shortPid = await pid(t, 'queued');
    // The two held partitions' fetches take both slots and stop before reading anything.
    const { open, inSlots, pass } = slotHolder([...held]);
    let gateOpen = false;
    const fetched: number[] = [];
    const fetch: WindowFetch = async (pool, ps, admit, outcome) => {
      fetched.push(...ps);
      await pass(ps);
      return fetchWindows(pool, ps, admit, outcome);
    };
    const b = await broker(t, fetch);
    // Which partitions each lookup was asked for.
    const lookedUp = new Set<number>();
    const lookup = b.engine.lookup.bind(b.engine);
    b.engine.lookup = (inputs) => {
      for (const i of inputs) lookedUp.add(i.partitionId);
      return lookup(inputs);
    };
    const heldPush = b.writer.push([item('held1', 'h1'), item('held2', 'h2')]);
    await inSlots;
    // A tail of 300 offsets, queued behind the held fetches: looked up at once.
    const res = await b.writer.push([...ids('new', 10), ...ids('old', 3)].map((x) => item('queued', x)));
    t.false(gateOpen, 'pushed while both slots were held');
    t.deepEqual(
      res.map((r) => r.status),
      [...Array<string>(10).fill('queued'), ...Array<string>(3).fill('duplicate')],
    );
    t.true(lookedUp.has(shortPid), 'on a lookup of its items');
    // A never-compacted tail of 5 000 offsets, queued after it: its tail is
    // read at once, and the push waits for its window, fetched first.
    let longSettled = false;
    const longPush = b.writer
      .push([...ids('new', 10), ...ids('old', 3)].map((x) => item('queuedlong', x)))
      .finally(() => (longSettled = true));
    while (b.watermarks.builds.get(longPid)?.tailOffsets === undefined) await t.context.sql.query('SELECT 1');
    t.is(b.watermarks.builds.get(longPid)!.tailOffsets, 5000);
    // More new partitions than the queue holds, one item each, in one push.
    const wide = Array.from({ length: MAX_QUEUED_FETCHES + 10 }, (_, i): PushItem => ({
      queue: 'wide',
      partition: `w${i}`,
      transactionId: `w-${i}`,
      payload: Buffer.from('{}'),
    }));
    const wideRes = await b.writer.push(wide);
    t.false(gateOpen);
    t.false(longSettled, 'the long tail waits for its window');
    t.deepEqual(
      wideRes.map((r) => r.status),
      wide.map(() => 'queued'),
    );
    t.is(b.watermarks.builds.size, MAX_CONCURRENT_FETCHES + MAX_QUEUED_FETCHES, 'the queue stops at its cap');
    gateOpen = true;
    open();
    t.deepEqual(
      (await heldPush).map((r) => r.status),
      ['queued', 'queued'],
    );
    t.deepEqual(
      (await longPush).map((r) => r.status),
      [...Array<string>(10).fill('queued'), ...Array<string>(3).fill('duplicate')],
    );
    t.false(lookedUp.has(longPid), 'the long tail was not looked up');
    t.is(fetched[2], longPid, 'the fetch a push waits for went to the front of the queue');
    t.true(fetched.indexOf(shortPid) > 2);
    await b.watermarks.builds.idle();
    const again = await b.writer.push([...wide.slice(0, 3), ...wide.slice(-3), item('queued', 'new-0'), item('queued', 'newer')]);
    t.deepEqual(
      again.map((r) => r.status),
      [...Array<string>(7).fill('duplicate'), 'queued'],
    );
  },
);

test.serial(
  'queued builds share one fetch; a window too large to share it is deferred and fetched alone; every one installs complete',
  async (t) => {
    const loader = await broker(t);
    await loader.writer.push(ids('a', 10).map((x) => item('slot1', x)));
    await loader.writer.push(ids('b', 10).map((x) => item('slot2', x)));
    const small = Array.from({ length: 5 }, (_, i) => `small${i}`);
    for (const q of small) await loader.writer.push(ids(q, 30).map((x) => item(q, x)));
    await loader.writer.push(ids('big', 5000).map((x) => item('bigwin', x)));
    const slots = [await pid(t, 'slot1'), await pid(t, 'slot2')];
    const smallPids = await Promise.all(small.map((q) => pid(t, q)));
    const bigPid = await pid(t, 'bigwin');
    const { open, inSlots, pass } = slotHolder(slots);
    const calls: number[][] = [];
    const admitted: number[] = [];
    const fetch: WindowFetch = async (pool, ps, admit, outcome) => {
      calls.push([...ps]);
      await pass(ps);
      return fetchWindows(
        pool,
        ps,
        (p, st) => {
          admitted.push(p);
          return admit(p, st);
        },
        outcome,
      );
    };
    const b = await broker(t, fetch);
    for (const p of slots) b.watermarks.builds.start(p);
    await inSlots;
    // Queued behind the held slots, no push waiting for any of them.
    for (const p of [smallPids[0]!, bigPid, ...smallPids.slice(1)]) b.watermarks.builds.start(p);
    open();
    await b.watermarks.builds.idle();
    t.deepEqual(
      calls,
      [[slots[0]], [slots[1]], [smallPids[0], bigPid, ...smallPids.slice(1)], [bigPid]],
      'one fetch for the queue, then the large window alone',
    );
    t.is(admitted.filter((p) => p === bigPid).length, 1, 'the deferred window is admitted once, by its own fetch');
    for (const [i, p] of [...slots, ...smallPids, bigPid].entries()) {
      const info = b.cache.entryInfo(p);
      const last = Number(
        (await t.context.sql.query('SELECT last_offset FROM queen.log_partitions WHERE id = $1', [p])).rows[0].last_offset,
      );
      t.is(info?.verifiedUpto, last, `partition ${i} installed up to its last offset`);
    }
    t.true(FETCH_BATCH >= 6, 'the six queued builds fit one batch (what the calls above expect)');
    // Installed complete: re-sent ids are duplicates, new ones queued, with no probe or lookup.
    const probes = b.probes();
    const lookups = b.lookups();
    const res = await b.writer.push([
      ...small.map((q) => item(q, `${q}-29`)),
      item('bigwin', 'big-0'),
      item('bigwin', 'big-4999'),
      ...small.map((q) => item(q, `${q}-new`)),
    ]);
    t.deepEqual(
      res.map((r) => r.status),
      [...Array<string>(small.length + 2).fill('duplicate'), ...Array<string>(small.length).fill('queued')],
    );
    t.is(b.probes(), probes);
    t.is(b.lookups(), lookups);
  },
);

test.serial('a queued build that ends without a snapshot while its push reads the queued tails leaves that push exact', async (t) => {
  const loader = await broker(t);
  await loader.writer.push(ids('a', 10).map((x) => item('race1', x)));
  await loader.writer.push(ids('b', 10).map((x) => item('race2', x)));
  await loader.writer.push(ids('old', 300).map((x) => item('racer', x)));
  const held = [await pid(t, 'race1'), await pid(t, 'race2')];
  const racer = await pid(t, 'racer');
  const { open, inSlots, pass } = slotHolder(held);
  const fetch: WindowFetch = async (pool, ps, admit, outcome) => {
    await pass(ps);
    // The racer's fetch fails: its build ends with no snapshot and leaves.
    if (ps.includes(racer)) throw new Error('fetch failed (the test)');
    return fetchWindows(pool, ps, admit, outcome);
  };
  // Lookups apart: the push is then one round, so the one failed fetch is
  // this build's. Looked up in the push, the re-sent ids would send the
  // segment with the full probe and its new items again, and that second
  // round would start (and fail) a fetch of its own.
  const b = await broker(t, fetch, 'apart');
  for (const p of held) b.watermarks.builds.start(p);
  await inSlots;
  // While the push reads its queued tails, the slots free and the racer's build ends.
  const builds = b.watermarks.builds;
  const read = builds.readQueuedTails.bind(builds);
  let raced = false;
  builds.readQueuedTails = async (pids) => {
    await read(pids);
    open();
    await builds.idle();
    raced = builds.get(racer) === undefined;
  };
  const res = await b.writer.push([...ids('new', 5), ...ids('old', 2)].map((x) => item('racer', x)));
  t.true(raced, 'the build was gone when the tails had been read');
  t.is(b.metrics.counter('queen_dedup_hydration_failures_total', '').get(), 1, 'its failed fetch counted once');
  t.deepEqual(
    res.map((r) => r.status),
    [...Array<string>(5).fill('queued'), ...Array<string>(2).fill('duplicate')],
  );
});

async function pid(t: { context: Ctx }, queue: string): Promise<number> {
  const r = await t.context.sql.query(
    'SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1',
    [queue],
  );
  return Number(r.rows[0].id);
}
