import test from 'ava';
import { DedupCache, estimateFootprintBytes, type TxnRow } from '../../../src/dedup/index.js';
import { FakeClock, hashAt, hashRun } from './helpers.js';

// The exact tier's memory policy (fit test, cooldown, recent-use guard,
// victims), which is the whole policy with the filter tier off and the
// policy for exact entries with it on. The filter tier's own policy
// (demotion, folding, promotion): filterTier.test.ts.

const KiB = 1024;

interface Part {
  last: number;
  rows: TxnRow[];
}

/**
 * One flush of pid the way the batching layer drives the cache: prepare,
 * hydrate if told to (admission first), ask for p_verified, then report the
 * append. Returns whether it hydrated.
 */
function flush(cache: DedupCache, clock: FakeClock, pid: number, part: Part, window: number): { hydrated: boolean; verified: number } {
  cache.beginFlush(pid);
  try {
    let hydrated = false;
    if (cache.prepare(pid, window) === 'hydrate') {
      const est = part.rows.reduce((n, r) => n + r.endOffset - r.baseOffset + 1, 0);
      if (cache.admitRebuild(pid, est)) {
        cache.install(pid, window, part.last, 0, part.rows, clock.ms);
        hydrated = true;
      }
    }
    const h = hashAt(pid, 1_000_000 + part.last);
    const verified = cache.verifiedFor(pid, h, 1);
    const base = part.last + 1;
    part.rows.push({ baseOffset: base, endOffset: base, createdMs: clock.ms, hashes: h });
    part.last = base;
    cache.recordAppend(pid, base, h, 1, clock.ms);
    return { hydrated, verified };
  } finally {
    cache.endFlush(pid);
  }
}

test('tiny cap, thousands of partitions round-robin: a stable resident set plus suppressed overflow, no rebuild thrash', (t) => {
  const clock = new FakeClock();
  const warnings: number[] = [];
  const capBytes = 4 * 1024 * KiB;
  const cache = new DedupCache({ filterTier: false, capBytes, now: clock.now, onWarn: () => warnings.push(clock.ms) });
  const P = 3000;
  const size = 200;
  const parts: Part[] = [];
  for (let p = 0; p < P; p++) {
    parts.push({ last: size - 1, rows: [{ baseOffset: 0, endOffset: size - 1, createdMs: clock.ms, hashes: hashRun(p, 0, size) }] });
  }
  const t0 = clock.ms;
  const rounds = 30;
  const hydrationsPerRound: number[] = [];
  const residentPerRound: number[] = [];
  let vouchedLastRound = 0;
  for (let r = 0; r < rounds; r++) {
    let hydrations = 0;
    vouchedLastRound = 0;
    for (let p = 0; p < P; p++) {
      clock.advance(1); // a round is 3 s: every resident partition stays "recently used"
      const res = flush(cache, clock, p, parts[p]!, 3600);
      if (res.hydrated) hydrations++;
      if (res.verified !== -1) vouchedLastRound++;
      if (cache.residentBytes() > capBytes) t.fail(`resident ${cache.residentBytes()} over the cap`);
    }
    hydrationsPerRound.push(hydrations);
    residentPerRound.push(cache.residentPartitions());
  }
  t.log(`hydrations per round: ${hydrationsPerRound.join(' ')}`);
  t.log(
    `resident partitions per round: ${residentPerRound.join(' ')}; suppressed now: ${cache.suppressedCount()}; vouched in the last round: ${vouchedLastRound}`,
  );
  t.log(`stats: ${JSON.stringify(cache.stats)}; warnings at +${warnings.map((w) => (w - t0) / 1000).join('s, +')}s`);
  const resident = residentPerRound[0]!;
  t.true(resident > 100 && resident < P, `a partial resident set (${resident})`);
  t.true(cache.residentBytes() <= 0.9 * capBytes + estimateFootprintBytes(size));
  // After the first round nothing is rebuilt again: the cooldowns expire
  // (rounds 10, 20 ...) but every resident partition was used within 5 s,
  // so the re-tests are refused instead of evicting the working set.
  t.deepEqual(hydrationsPerRound.slice(1), new Array(rounds - 1).fill(0));
  t.true(
    residentPerRound.every((n) => n === resident),
    'the resident set is stable',
  );
  t.is(vouchedLastRound, resident, 'every resident partition still vouches');
  t.is(cache.stats.evictions, 0);
  t.is(cache.suppressedCount(), P - resident);
  // 90 s of suppressions: at most one warning per minute.
  t.true(warnings.length >= 1 && warnings.length <= 2);
  for (let i = 1; i < warnings.length; i++) t.true(warnings[i]! - warnings[i - 1]! >= 60_000);
});

test('tiny cap, a round-robin slower than the 5 s guard (8 s a pass): the resident set still holds, no rebuild thrash', (t) => {
  // The regime the fixed 5 s guard lost: every resident partition is idle
  // for up to 8 s between its uses, so each cooldown expiry (every 30 s per
  // suppressed partition) evicted one that was about to be used, and the
  // evicted ones came back the same way (0.22-0.26 rehydrations per flush in
  // make bench's slow scenario). A partition seen returning every 8 s is
  // protected for twice that; a newcomer until the cooldown has passed.
  const clock = new FakeClock();
  const capBytes = 4 * 1024 * KiB;
  const cache = new DedupCache({ filterTier: false, capBytes, now: clock.now });
  const P = 2000;
  const size = 200;
  const parts: Part[] = [];
  for (let p = 0; p < P; p++) {
    parts.push({ last: size - 1, rows: [{ baseOffset: 0, endOffset: size - 1, createdMs: clock.ms, hashes: hashRun(p, 0, size) }] });
  }
  const rounds = 20; // 160 s: five cooldown expiries of every suppressed partition
  const hydrationsPerRound: number[] = [];
  const residentPerRound: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let hydrations = 0;
    for (let p = 0; p < P; p++) {
      clock.advance(4); // a pass is 8 s
      if (flush(cache, clock, p, parts[p]!, 3600).hydrated) hydrations++;
      if (cache.residentBytes() > capBytes) t.fail(`resident ${cache.residentBytes()} over the cap`);
    }
    hydrationsPerRound.push(hydrations);
    residentPerRound.push(cache.residentPartitions());
  }
  t.log(
    `hydrations per round: ${hydrationsPerRound.join(' ')}; resident: ${residentPerRound.join(' ')}; stats ${JSON.stringify(cache.stats)}`,
  );
  const resident = residentPerRound[0]!;
  t.true(resident > 100 && resident < P, `a partial resident set (${resident})`);
  t.deepEqual(hydrationsPerRound.slice(1), new Array(rounds - 1).fill(0));
  t.true(
    residentPerRound.every((n) => n === resident),
    'the resident set is stable',
  );
  t.is(cache.stats.evictions, 0);
});

test('a partition used within the last 5 s is never evicted to admit another; the 30 s cooldown is served first', (t) => {
  const clock = new FakeClock();
  const one = estimateFootprintBytes(5000);
  const cache = new DedupCache({ filterTier: false, capBytes: Math.ceil((2.5 * one) / 0.9), now: clock.now });
  const rows = (s: number): TxnRow[] => [{ baseOffset: 0, endOffset: 4999, createdMs: clock.ms, hashes: hashRun(s, 0, 5000) }];
  for (const pid of [1, 2]) {
    t.is(cache.prepare(pid, 60), 'hydrate');
    t.true(cache.admitRebuild(pid, 5000));
    cache.install(pid, 60, 4999, 0, rows(pid), clock.ms);
    cache.verifiedFor(pid, hashAt(0, 0), 1);
  }
  clock.advance(1000);
  t.is(cache.prepare(3, 60), 'hydrate');
  t.false(cache.admitRebuild(3, 5000), '1 and 2 were used 1 s ago: 3 is suppressed instead');
  t.is(cache.stats.evictions, 0);
  t.is(cache.suppressedCount(), 1);
  t.is(cache.prepare(3, 60), 'suppressed');
  t.false(cache.admitRebuild(3, 5000), 'not re-tested during the cooldown');
  t.is(cache.stats.suppressions, 1);

  clock.advance(27_000); // t0 + 28 s: use 1 only
  cache.verifiedFor(1, hashAt(0, 0), 1);
  clock.advance(2_999); // t0 + 30.999 s: 3 was suppressed at t0 + 1 s, still cooling down
  t.is(cache.prepare(3, 60), 'suppressed');
  clock.advance(1); // t0 + 31 s: cooldown served
  t.is(cache.suppressedCount(), 0);
  t.is(cache.prepare(3, 60), 'hydrate');
  t.true(cache.admitRebuild(3, 5000), '2 is idle for 30 s and can go; 1 was used 3 s ago and stays');
  cache.install(3, 60, 4999, 0, rows(3), clock.ms);
  t.truthy(cache.entryInfo(1));
  t.is(cache.entryInfo(2), undefined);
  t.truthy(cache.entryInfo(3));
  t.is(cache.stats.evictions, 1);
});

test('the recent-use guard follows each partition: twice its return interval (at most 60 s), 30 s for a newcomer; then it may be evicted', (t) => {
  const clock = new FakeClock();
  const one = estimateFootprintBytes(5000);
  const cache = new DedupCache({ filterTier: false, capBytes: Math.ceil((2.5 * one) / 0.9), now: clock.now });
  const rows = (s: number): TxnRow[] => [{ baseOffset: 0, endOffset: 4999, createdMs: clock.ms, hashes: hashRun(s, 0, 5000) }];
  /** A flush that installs pid (its own use is not a return); a window of an hour, so nothing expires and every entry keeps its size. */
  const admit = (pid: number): boolean => {
    if (!cache.admitRebuild(pid, 5000)) return false;
    cache.install(pid, 3600, 4999, 0, rows(pid), clock.ms);
    cache.verifiedFor(pid, hashAt(0, 0), 1);
    return true;
  };
  const use = (pid: number): void => void cache.verifiedFor(pid, hashAt(0, 0), 1);
  t.true(admit(1));
  t.true(admit(2));
  // Newcomers: protected for 30 s although idle for more than 5 s.
  clock.advance(30_000);
  t.false(admit(3), '1 and 2 have not returned yet and were installed 30 s ago');
  t.is(cache.stats.evictions, 0);
  // Both return after 30 s: each is now protected for 60 s of idleness.
  use(1);
  use(2);
  clock.advance(60_000);
  t.false(admit(4), '1 and 2 return every 30 s: idle 60 s is still within their rhythm');
  clock.advance(1);
  t.true(admit(5), 'idle for longer than twice their rhythm: one may go');
  t.is(cache.stats.evictions, 1);
  t.is(cache.entryInfo(1), undefined, 'the least recently used went');
  t.truthy(cache.entryInfo(2));
  // A slow rhythm is capped: 2 returns after 60 s (2 x 60 s would be 120 s), protected 60 s only.
  use(2);
  clock.advance(60_000);
  use(5); // 5 returns after 60 s too: protected for 60 s from now
  t.false(admit(6), '2 was used exactly 60 s ago: still protected');
  clock.advance(1);
  t.true(admit(7), 'the cap: 2 is idle for 60 s + 1 ms');
  t.is(cache.entryInfo(2), undefined);
  t.truthy(cache.entryInfo(5));
  t.is(cache.stats.evictions, 2);
});

test('victims are evicted only if that makes the rebuild fit', (t) => {
  const clock = new FakeClock();
  const one = estimateFootprintBytes(5000);
  const cache = new DedupCache({ filterTier: false, capBytes: Math.ceil((2.5 * one) / 0.9), now: clock.now });
  cache.install(1, 60, 4999, 0, [{ baseOffset: 0, endOffset: 4999, createdMs: clock.ms, hashes: hashRun(1, 0, 5000) }], clock.ms);
  clock.advance(31_000); // past the newcomer guard: 1 may go
  cache.install(2, 60, 4999, 0, [{ baseOffset: 0, endOffset: 4999, createdMs: clock.ms, hashes: hashRun(2, 0, 5000) }], clock.ms);
  // 3 needs ~3 entries' worth: evicting idle 1 is not enough while 2 is recent, so nothing goes.
  t.false(cache.admitRebuild(3, 15_000));
  t.truthy(cache.entryInfo(1));
  t.is(cache.stats.evictions, 0);
});

test('a walk for victims that finds none is not repeated until a guard it passed runs out (at most a second), for that excess or more', (t) => {
  const clock = new FakeClock();
  const size = 100;
  const n = 2000;
  const cache = new DedupCache({ filterTier: false, capBytes: Math.ceil((n * estimateFootprintBytes(size)) / 0.9), now: clock.now });
  const rows = (s: number): TxnRow[] => [{ baseOffset: 0, endOffset: size - 1, createdMs: clock.ms, hashes: hashRun(s, 0, size) }];
  for (let pid = 1; pid <= n; pid++) {
    if (!cache.admitRebuild(pid, size)) return t.fail(`partition ${pid} was not admitted while the cache filled`);
    cache.install(pid, 3600, size - 1, 0, rows(pid), clock.ms);
  }
  // Estimates no free room covers: each admission needs victims.
  const big = 40 * size;
  const smaller = 20 * size;
  clock.advance(6_000);
  // Every resident entry is a newcomer, guarded for 30 s after its install: nobody may go.
  const scans0 = cache.stats.victimScans;
  for (let pid = n + 1; pid <= n + 50; pid++) t.false(cache.admitRebuild(pid, big), `${pid} evicts no one`);
  t.is(cache.stats.victimScans - scans0, 1, 'one walk answers the refusals that follow');
  t.false(cache.admitRebuild(n + 51, smaller), 'a smaller excess walks again');
  t.is(cache.stats.victimScans - scans0, 2);
  clock.advance(1_000);
  t.false(cache.admitRebuild(n + 52, big));
  t.is(cache.stats.victimScans - scans0, 3, 'an answer is kept for a second at most');
  // The guards run out 30 s after the installs (t0 + 30 s): a walk just before finds none; the first
  // admission after that moment walks again although less than a second passed, and evicts.
  clock.advance(30_000 - 7_000 - 500);
  t.false(cache.admitRebuild(n + 53, big));
  t.is(cache.stats.victimScans - scans0, 4);
  clock.advance(501);
  t.true(cache.admitRebuild(n + 54, big), 'guards ran out: victims are found at once');
  t.is(cache.stats.victimScans - scans0, 5);
  t.true(cache.stats.evictions > 0);
});

test('a partition without an entry is fetched only if an empty entry fits; gap rebuilds are never gated, even over the cap', (t) => {
  const clock = new FakeClock();
  const cache = new DedupCache({ filterTier: false, capBytes: 1024, now: clock.now });
  t.is(cache.prepare(0, 60), 'hydrate', 'an empty entry fits the empty cache');
  t.true(cache.admitRebuild(0, 0), 'a brand-new partition (empty window) is admitted');
  cache.install(0, 60, -1, 0, [], clock.ms);
  cache.verifiedFor(0, hashAt(0, 0), 1);
  cache.recordAppend(0, 0, hashRun(0, 0, 100), 100, clock.ms);
  t.true(cache.residentBytes() > 1024 * 0.9, 'its appends took the whole budget');
  // No room for another, and partition 0 is in its recent-use guard: the
  // next partition is turned away without a fetch (it is looked up).
  t.is(cache.prepare(1, 60), 'suppressed');
  t.is(cache.stats.suppressions, 1);
  t.is(cache.verifiedFor(1, hashAt(1, 0), 1), -1);
  // Once partition 0 may be evicted, a partition is fetched again.
  clock.advance(31_000);
  t.is(cache.prepare(2, 60), 'hydrate');
  t.true(cache.admitRebuild(2, 0));
  cache.install(2, 60, -1, 0, [], clock.ms);
  cache.recordAppend(2, 0, hashRun(2, 0, 100), 100, clock.ms);
  t.truthy(cache.entryInfo(2), 'the partition just used stays');
  // A gap (another broker's offsets in between) rebuild replaces bytes already resident: never gated.
  cache.recordAppend(2, 500, hashAt(2, 1), 1, clock.ms);
  t.is(cache.prepare(2, 60), 'hydrate');
  t.true(cache.admitRebuild(2, 1_000_000), 'a gap rebuild is a cheap admission');
  t.is(cache.stats.suppressions, 1);
});

test('a rebuild marked for a resident entry is gated, and a refusal drops the stale entry', (t) => {
  const clock = new FakeClock();
  const cache = new DedupCache({ filterTier: false, capBytes: 100 * KiB, now: clock.now });
  cache.install(1, 60, 4999, 0, [{ baseOffset: 0, endOffset: 4999, createdMs: clock.ms, hashes: hashRun(1, 0, 5000) }], clock.ms);
  cache.recordUnknown(1);
  t.is(cache.prepare(1, 60), 'hydrate');
  t.false(cache.admitRebuild(1, 50_000));
  t.is(cache.entryInfo(1), undefined);
  t.is(cache.prepare(1, 60), 'suppressed');
  t.is(cache.verifiedFor(1, hashAt(1, 0), 1), -1);
});

test('the last-footprint hint beats a loose upper bound', (t) => {
  const clock = new FakeClock();
  const one = estimateFootprintBytes(5000);
  const cache = new DedupCache({ filterTier: false, capBytes: Math.ceil((1.5 * one) / 0.9), now: clock.now });
  cache.install(1, 60, 4999, 0, [{ baseOffset: 0, endOffset: 4999, createdMs: clock.ms, hashes: hashRun(1, 0, 5000) }], clock.ms);
  t.is(cache.prepare(1, 0), 'suppressed'); // dedup turned off: the entry goes, its size is remembered
  // The allocator bound says 10M hashes; the hint says one 5000-hash entry.
  t.is(cache.prepare(1, 60), 'hydrate');
  t.true(cache.admitRebuild(1, 10_000_000));
  t.false(cache.admitRebuild(2, 10_000_000), 'no hint for 2: the bound is all we have');
});

test('one warning per minute, and a gauge of suppressed partitions', (t) => {
  const clock = new FakeClock();
  const warnings: string[] = [];
  const cache = new DedupCache({ filterTier: false, capBytes: 1024, now: clock.now, onWarn: (m) => warnings.push(m) });
  for (let i = 0; i < 180; i++) {
    t.false(cache.admitRebuild(i, 10_000));
    clock.advance(1000);
  }
  t.is(cache.stats.suppressions, 180);
  t.is(warnings.length, 3);
  t.log(warnings[1]);
  t.regex(warnings[1]!, /60 partition rebuild\(s\) suppressed/);
  // Suppressed at +0 .. +179 s, now +180 s: the deadlines still ahead are those of +151 .. +179 s.
  t.is(cache.suppressedCount(), 29);
});

test('auxiliary maps (cooldowns, footprint hints) stay under the 100,000-entry soft cap', (t) => {
  const clock = new FakeClock();
  const cache = new DedupCache({ filterTier: false, capBytes: 1024, now: clock.now });
  let maxCooldowns = 0;
  let maxHints = 0;
  for (let pid = 0; pid < 150_000; pid++) {
    cache.admitRebuild(pid, 1000); // ~17 KB estimated, over the 1 KiB cap: refused, a cooldown each
    cache.install(1_000_000 + pid, 60, -1, 0, [], clock.ms);
    cache.prepare(1_000_000 + pid, 0); // dropped: a footprint hint each
    const s = cache.auxSizes();
    if (s.cooldowns > maxCooldowns) maxCooldowns = s.cooldowns;
    if (s.hints > maxHints) maxHints = s.hints;
  }
  t.log(`max cooldown entries ${maxCooldowns}, max hint entries ${maxHints}`);
  t.true(maxCooldowns <= 100_000 && maxCooldowns > 50_000);
  t.true(maxHints <= 100_000 && maxHints > 50_000);
  t.is(cache.auxSizes().reservations, 0);
});

test('rebuilds admitted but not yet installed hold their estimate, so concurrent flushes cannot jointly overshoot; a lost flush stops holding it after 60 s', (t) => {
  const clock = new FakeClock();
  const one = estimateFootprintBytes(5000);
  const cache = new DedupCache({ filterTier: false, capBytes: Math.ceil((1.5 * one) / 0.9), now: clock.now });
  cache.beginFlush(1);
  t.true(cache.admitRebuild(1, 5000)); // 1 is fetching ...
  t.false(cache.admitRebuild(2, 5000), '... so 2 does not fit beside it');
  cache.install(1, 60, 4999, 0, [{ baseOffset: 0, endOffset: 4999, createdMs: clock.ms, hashes: hashRun(1, 0, 5000) }], clock.ms);
  cache.endFlush(1);
  t.is(cache.auxSizes().reservations, 0, 'the install released it');

  const c2 = new DedupCache({ filterTier: false, capBytes: Math.ceil((1.5 * one) / 0.9), now: clock.now });
  t.true(c2.admitRebuild(1, 5000)); // a flush that never installs nor ends
  clock.advance(59_999);
  t.false(c2.admitRebuild(2, 5000));
  clock.advance(1);
  t.true(c2.admitRebuild(3, 5000), 'the stale reservation no longer counts');
  t.is(c2.auxSizes().reservations, 1);
});
