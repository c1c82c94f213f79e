import test from 'ava';
import { DedupCache, type TxnRow } from '../../../src/dedup/index.js';
import { FakeClock, hashAt, hashRun, makeRows } from './helpers.js';

const KB = 1024;

/** prepare -> admit -> install, as the flush does; returns whether it installed. */
function hydrate(cache: DedupCache, pid: number, window: number, last: number, rows: TxnRow[], at: number): boolean {
  if (cache.prepare(pid, window) !== 'hydrate') return false;
  if (!cache.admitRebuild(pid, last + 1)) return false;
  cache.install(pid, window, last, 0, rows, at);
  return true;
}

// 20 000 hashes: ~430 KB in the exact tier, ~80 KB in the compact tier.
const N = 20_000;

test('compact tier on: a rebuild the exact tier cannot admit gets a compact entry that vouches and names its hits', (t) => {
  const clock = new FakeClock();
  const cache = new DedupCache({ capBytes: 200 * KB, now: clock.now, compactTier: true });
  const rows = makeRows(1, N, 250, () => clock.ms - 1000);
  t.true(hydrate(cache, 1, 60, N - 1, rows, clock.ms));
  const info = cache.entryInfo(1)!;
  t.like(info, { tier: 'compact', state: 'vouching', verifiedUpto: N - 1, hydratedFrom: -1 });
  t.true(info.bytes / N <= 4.5, `${info.bytes / N} B/hash`);
  t.like(cache.stats, { hydrations: 1, compactInstalls: 1, suppressions: 0 });
  // A segment with two stored hashes and a fresh one: vouched, hits named at their offsets.
  const seg = Buffer.concat([hashAt(1, 123), hashAt(77, 1), hashAt(1, 19_999)]);
  const v = cache.vouchWithHints(1, seg, 3);
  t.is(v.verified, N - 1);
  t.true(v.hits.some((h) => h.index === 0 && h.offsets.includes(123)));
  t.true(v.hits.some((h) => h.index === 2 && h.offsets.includes(19_999)));
  // Appends keep it vouching, in offset order.
  cache.beginFlush(1);
  cache.recordAppend(1, N, hashRun(2, 0, 10), 10, clock.ms);
  cache.endFlush(1);
  t.is(cache.verifiedFor(1, hashAt(3, 0), 1), N + 9);
  t.is(cache.verifiedFor(1, hashAt(2, 4), 1), -1, 'an appended hash is a local hit');
});

test('compact tier off (the default): the same rebuild is suppressed', (t) => {
  const clock = new FakeClock();
  const cache = new DedupCache({ capBytes: 200 * KB, now: clock.now });
  t.false(
    hydrate(
      cache,
      1,
      60,
      N - 1,
      makeRows(1, N, 250, () => clock.ms - 1000),
      clock.ms,
    ),
  );
  t.like(cache.stats, { suppressions: 1, compactInstalls: 0 });
  t.is(cache.prepare(1, 60), 'suppressed');
});

test('compact tier on: a rebuild neither tier can admit is suppressed; one the exact tier can admit is exact', (t) => {
  const clock = new FakeClock();
  const cache = new DedupCache({ capBytes: 40 * KB, now: clock.now, compactTier: true });
  t.false(
    hydrate(
      cache,
      1,
      60,
      N - 1,
      makeRows(1, N, 250, () => clock.ms - 1000),
      clock.ms,
    ),
  );
  t.like(cache.stats, { suppressions: 1, compactInstalls: 0 });
  t.true(
    hydrate(
      cache,
      2,
      60,
      499,
      makeRows(2, 500, 250, () => clock.ms - 1000),
      clock.ms,
    ),
  );
  t.like(cache.entryInfo(2), { tier: 'exact' });
});

test('compact tier on: a compact entry rebuilt after a window change goes exact once the exact tier fits', (t) => {
  const clock = new FakeClock();
  const cache = new DedupCache({ capBytes: 200 * KB, now: clock.now, compactTier: true });
  const rows = makeRows(1, N, 250, () => clock.ms - 1000);
  t.true(hydrate(cache, 1, 60, N - 1, rows, clock.ms));
  t.like(cache.entryInfo(1), { tier: 'compact' });
  // A gap (another broker wrote) is a cheap rebuild: it stays compact.
  cache.recordAppend(1, N + 5, hashRun(3, 0, 1), 1, clock.ms);
  t.like(cache.entryInfo(1), { state: 'gap' });
  t.true(hydrate(cache, 1, 60, N - 1, rows, clock.ms));
  t.like(cache.entryInfo(1), { tier: 'compact', state: 'vouching' });
  // The window changes; the rows still in it are few now: the exact tier fits.
  const few = rows.slice(-2);
  t.is(cache.prepare(1, 30), 'hydrate');
  t.true(cache.admitRebuild(1, 500));
  cache.install(1, 30, N - 1, 0, few, clock.ms);
  t.like(cache.entryInfo(1), { tier: 'exact', windowSeconds: 30, hydratedFrom: N - 501 });
});
