import test from 'ava';
import { DedupCache } from '../../../src/dedup/index.js';
import { FakeClock, hashRun, makeRows } from './helpers.js';

// DedupCache's side of a window fetched outside the partition's flushes
// (src/fusion/windowBuilds.ts): appends reported meanwhile are replayed on
// install, and the fetch's admission outlives the flushes in between.

const PID = 7;

test('appends reported during a background fetch are replayed above the snapshot; the entry vouches the last offset and knows them', (t) => {
  const clock = new FakeClock();
  const cache = new DedupCache({ capBytes: 64 << 20, now: clock.now });
  const rows = makeRows(1, 1000, 250, () => clock.ms);
  cache.beginFetch(PID);
  t.true(cache.admitRebuild(PID, 1000));
  // Two flushes while the fetch is under way: one whose push committed before the snapshot, one after.
  const before = hashRun(2, 0, 10);
  const after = hashRun(3, 0, 20);
  for (const [base, h, n] of [
    [1000, before, 10],
    [1010, after, 20],
  ] as const) {
    cache.beginFlush(PID);
    t.is(cache.prepare(PID, 60), 'hydrate', 'no entry yet: the flush is told to build (its caller sees one under way)');
    cache.recordAppend(PID, base, h, n, clock.ms);
    cache.endFlush(PID);
  }
  // The snapshot holds rows up to 1009 (the first push committed before it).
  cache.install(PID, 60, 1009, 0, [...rows, { baseOffset: 1000, endOffset: 1009, createdMs: clock.ms, hashes: before }], clock.ms);
  const info = cache.entryInfo(PID)!;
  t.is(info.verifiedUpto, 1029);
  t.is(info.state, 'vouching');
  const v = cache.vouchWithHints(PID, after, 20);
  t.deepEqual(
    v.hits.map((h) => h.offsets[0]),
    Array.from({ length: 20 }, (_, i) => 1010 + i),
    'the replayed append is known at its offsets',
  );
  t.false(cache.isFetching(PID));
});

test('an append above the snapshot that skips offsets (another writer) leaves the installed entry gapped; an unknown outcome meanwhile marks it for rebuild', (t) => {
  const clock = new FakeClock();
  for (const kind of ['gap', 'unknown'] as const) {
    const cache = new DedupCache({ capBytes: 64 << 20, now: clock.now });
    cache.beginFetch(PID);
    t.true(cache.admitRebuild(PID, 500));
    cache.beginFlush(PID);
    cache.prepare(PID, 60);
    if (kind === 'gap') cache.recordAppend(PID, 520, hashRun(4, 0, 5), 5, clock.ms);
    else cache.recordUnknown(PID);
    cache.endFlush(PID);
    cache.install(
      PID,
      60,
      499,
      0,
      makeRows(5, 500, 100, () => clock.ms),
      clock.ms,
    );
    t.is(cache.entryInfo(PID)!.state, kind === 'gap' ? 'gap' : 'rebuild', kind);
    t.is(cache.vouchWithHints(PID, hashRun(6, 0, 1), 1).verified, -1, `${kind}: the entry does not vouch`);
  }
});

test("a fetch's admission keeps its reservation across the flushes in between; endFetch gives it back", (t) => {
  const clock = new FakeClock();
  const rows = (s: number) => makeRows(s, 5000, 250, () => clock.ms);
  // Room for about one exact entry of 5 000 hashes.
  const cache = new DedupCache({ capBytes: 160 * 1024, now: clock.now, filterTier: false });
  cache.beginFetch(1);
  t.true(cache.admitRebuild(1, 5000));
  cache.beginFlush(1);
  cache.prepare(1, 60);
  cache.endFlush(1);
  // Partition 2 cannot be admitted beside 1's reservation.
  cache.beginFlush(2);
  t.is(cache.prepare(2, 60), 'hydrate');
  t.false(cache.admitRebuild(2, 5000), 'the reservation still counts after a flush of 1');
  cache.endFlush(2);
  cache.endFetch(1);
  clock.advance(31_000);
  cache.beginFlush(3);
  t.is(cache.prepare(3, 60), 'hydrate');
  t.true(cache.admitRebuild(3, 5000), 'given back');
  cache.install(3, 60, 4999, 0, rows(3), clock.ms);
  cache.endFlush(3);
  t.is(cache.entryInfo(3)!.state, 'vouching');
});

test('coverage first across fetches in flight: a rebuild admitted as exact and still fetching is turned into a filter rebuild to admit another', (t) => {
  const clock = new FakeClock();
  const n = 20_000;
  // One exact entry of 20 000 hashes fits; two do not, and a filter beside an exact one does not either.
  const cache = new DedupCache({ capBytes: 480 * 1024, now: clock.now });
  cache.beginFetch(1);
  t.true(cache.admitRebuild(1, n), 'the first is admitted (exact)');
  cache.beginFetch(2);
  t.true(cache.admitRebuild(2, n), "the second is admitted too: the first one's pending admission became a filter rebuild");
  cache.install(
    1,
    60,
    n - 1,
    0,
    makeRows(1, n, 250, () => clock.ms),
    clock.ms,
  );
  cache.install(
    2,
    60,
    n - 1,
    0,
    makeRows(2, n, 250, () => clock.ms),
    clock.ms,
  );
  t.is(cache.entryInfo(1)!.tier, 'filter');
  t.is(cache.entryInfo(2)!.tier, 'filter');
  t.is(cache.stats.suppressions, 0);
  t.true(cache.residentBytes() <= 480 * 1024);
});
