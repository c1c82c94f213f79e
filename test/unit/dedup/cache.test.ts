import test from 'ava';
import { DedupCache, type TxnRow } from '../../../src/dedup/index.js';
import { UNIT_HASHES as BLOCK_HASHES } from '../../../src/dedup/constants.js';
import { FakeClock, hashAt, hashRun, makeRows } from './helpers.js';

const MB = 2 ** 20;

function freshCache(clock = new FakeClock(), capBytes = 512 * MB): { cache: DedupCache; clock: FakeClock } {
  return { cache: new DedupCache({ capBytes, now: clock.now }), clock };
}

/** prepare -> admit -> install, as the flush does; returns the prepare answer. */
function hydrate(cache: DedupCache, pid: number, window: number, last: number, txnsStart: number, rows: TxnRow[], at: number): string {
  const a = cache.prepare(pid, window);
  if (
    a === 'hydrate' &&
    cache.admitRebuild(
      pid,
      rows.reduce((n, r) => n + r.endOffset - r.baseOffset + 1, 0),
    )
  ) {
    cache.install(pid, window, last, txnsStart, rows, at);
  }
  return a;
}

test('a brand-new partition hydrates empty and vouches its (empty) allocator watermark', (t) => {
  const { cache, clock } = freshCache();
  t.is(cache.prepare(1, 60), 'hydrate');
  t.true(cache.admitRebuild(1, 0));
  cache.install(1, 60, -1, 0, [], clock.ms);
  t.is(cache.prepare(1, 60), 'ready');
  t.is(cache.verifiedFor(1, hashAt(1, 0), 1), -1, 'V = last_offset = -1: nothing below to vouch for');
  cache.recordAppend(1, 0, hashAt(1, 0), 1, clock.ms);
  t.is(cache.verifiedFor(1, hashAt(1, 1), 1), 0);
  t.is(cache.verifiedFor(1, hashAt(1, 0), 1), -1, 'a local hit routes to the full probe');
  t.like(cache.stats, { hydrations: 1, localHits: 1, vouched: 1 });
});

test('install: hydratedFrom is the lowest fetched base - 1, never below txnsStart - 1, or lastOffset with no rows', (t) => {
  const { cache, clock } = freshCache();
  const rows = makeRows(1, 1000, 100, () => clock.ms - 1000).map((r) => ({
    ...r,
    baseOffset: r.baseOffset + 500,
    endOffset: r.endOffset + 500,
  }));
  cache.install(1, 60, 1499, 0, rows, clock.ms);
  t.like(cache.entryInfo(1), { hydratedFrom: 499, verifiedUpto: 1499, state: 'vouching' });

  // txnsStart inside the first row: the row is kept whole, H = txnsStart - 1.
  cache.install(2, 60, 1499, 550, rows, clock.ms);
  t.like(cache.entryInfo(2), { hydratedFrom: 549 });
  t.is(cache.verifiedFor(2, rows[0]!.hashes.subarray(0, 16), 1), -1, 'the straddling row is still known');

  // Rows wholly below txnsStart are skipped: SQL never looks there again.
  cache.install(3, 60, 1499, 800, rows, clock.ms);
  t.like(cache.entryInfo(3), { hydratedFrom: 799 });
  t.is(cache.verifiedFor(3, rows[0]!.hashes.subarray(0, 16), 1), 1499, 'purged rows are not known (and need not be)');
  t.is(cache.verifiedFor(3, rows[3]!.hashes.subarray(0, 16), 1), -1);

  cache.install(4, 60, 41, 0, [], clock.ms);
  t.like(cache.entryInfo(4), { hydratedFrom: 41, verifiedUpto: 41 });
});

test('install rejects rows that cannot come from one snapshot', (t) => {
  const { cache, clock } = freshCache();
  const rows = makeRows(1, 20, 10, () => clock.ms);
  t.throws(() => cache.install(1, 60, 15, 0, rows, clock.ms), { instanceOf: RangeError }, 'row above last_offset');
  t.throws(() => cache.install(1, 60, 19, 0, [rows[1]!, rows[0]!], clock.ms), { instanceOf: RangeError }, 'descending');
  t.throws(
    () => cache.install(1, 60, 19, 0, [{ ...rows[0]!, hashes: Buffer.alloc(16) }], clock.ms),
    { instanceOf: RangeError },
    'hash bytes',
  );
  t.is(cache.entryInfo(1), undefined);
});

test('steady state: a single-writer stream of new hashes is vouched at last_offset every time (SQL skips the probe)', (t) => {
  const { cache, clock } = freshCache();
  const window = 10;
  const rows = makeRows(1, 3 * BLOCK_HASHES, 64, (r) => clock.ms - 9000 + r);
  let last = 3 * BLOCK_HASHES - 1;
  t.is(hydrate(cache, 7, window, last, 0, rows, clock.ms), 'hydrate');
  let skipped = 0;
  const pushes = 4000;
  for (let i = 0; i < pushes; i++) {
    clock.advance(10); // 40 s in all: four windows, so expiry runs for real
    t.is(cache.prepare(7, window), 'ready');
    const n = 1 + (i % 7);
    const hashes = hashRun(2, i * 8, n);
    const w = cache.verifiedFor(7, hashes, n);
    if (w === last) skipped++; // v_last > v_from is false: no probe
    cache.recordAppend(7, last + 1, hashes, n, clock.ms);
    last += n;
  }
  t.is(skipped, pushes);
  t.log(`${skipped}/${pushes} pushes sent p_verified == last_offset`);
  const info = cache.entryInfo(7)!;
  t.is(info.verifiedUpto, last);
  t.true(info.hydratedFrom > 3 * BLOCK_HASHES - 1, 'expiry raised hydratedFrom past the hydrated units');
  t.true(info.units <= 3, `in-window data only (+ the stale front and the filling unit): ${info.units} units`);
  t.is(cache.stats.hydrations, 1);
});

test("expiry forgets only wholly pre-window units and raises hydratedFrom to the forgotten unit's highest offset", (t) => {
  const { cache, clock } = freshCache();
  const t0 = clock.ms;
  // Unit 0 (offsets 0..4095) committed at t0 - 100 s, unit 1 at t0 - 50 s, a filling unit of 10 at t0.
  const rows = [
    ...makeRows(1, BLOCK_HASHES, BLOCK_HASHES, () => t0 - 100_000),
    ...makeRows(2, BLOCK_HASHES, BLOCK_HASHES, () => t0 - 50_000).map((r) => ({
      ...r,
      baseOffset: r.baseOffset + BLOCK_HASHES,
      endOffset: r.endOffset + BLOCK_HASHES,
    })),
  ];
  const hot = { baseOffset: 2 * BLOCK_HASHES, endOffset: 2 * BLOCK_HASHES + 9, createdMs: t0, hashes: hashRun(3, 0, 10) };
  cache.install(1, 60, 2 * BLOCK_HASHES + 9, 0, [...rows, hot], t0);
  t.like(cache.entryInfo(1), { units: 3, openUnitHashes: 10, hydratedFrom: -1 });
  const old = rows[0]!.hashes.subarray(0, 16);
  // Window 60 s + 5 s slack: unit 0 (100 s old) is pre-window, unit 1 (50 s) is not.
  t.is(cache.verifiedFor(1, rows[1]!.hashes.subarray(0, 16), 1), -1, 'unit 1 hash is in-window: local hit');
  t.like(cache.entryInfo(1), { units: 2, hydratedFrom: BLOCK_HASHES - 1 });
  t.is(cache.verifiedFor(1, old, 1), 2 * BLOCK_HASHES + 9, 'a pre-window hash no longer blocks the vouch');
  clock.advance(14_999); // unit 1 is 64.999 s old: still kept (5 s slack on the safe side)
  cache.verifiedFor(1, hashAt(9, 0), 1);
  t.like(cache.entryInfo(1), { units: 2 });
  clock.advance(2);
  cache.verifiedFor(1, hashAt(9, 0), 1);
  t.like(cache.entryInfo(1), { units: 1, openUnitHashes: 10, hydratedFrom: 2 * BLOCK_HASHES - 1 });
  t.is(cache.verifiedFor(1, rows[1]!.hashes.subarray(0, 16), 1), 2 * BLOCK_HASHES + 9, 'a forgotten unit no longer answers');
  t.is(cache.verifiedFor(1, hot.hashes.subarray(0, 16), 1), -1, 'the filling unit still does');
});

test('interleave: base > verifiedUpto + 1 records a gap and answers -1 until reinstalled (a cheap, ungated admission)', (t) => {
  const { cache, clock } = freshCache(new FakeClock(), 64 * 1024);
  hydrate(cache, 1, 60, -1, 0, [], clock.ms);
  cache.recordAppend(1, 0, hashRun(1, 0, 3), 3, clock.ms);
  t.is(cache.verifiedFor(1, hashAt(2, 0), 1), 2);
  cache.recordAppend(1, 5, hashRun(1, 3, 2), 2, clock.ms); // another broker wrote 3..4
  t.like(cache.entryInfo(1), { state: 'gap', verifiedUpto: 2 });
  t.is(cache.stats.gaps, 1);
  t.is(cache.verifiedFor(1, hashAt(2, 1), 1), -1);
  cache.recordAppend(1, 7, hashAt(2, 9), 1, clock.ms);
  t.is(cache.verifiedFor(1, hashAt(2, 1), 1), -1, 'still -1: appends after a gap are ignored');
  t.is(cache.prepare(1, 60), 'hydrate');
  // The cap is tiny, but a gap rebuild replaces bytes already resident: never gated.
  t.true(cache.admitRebuild(1, 10_000_000));
  cache.install(1, 60, 7, 0, [{ baseOffset: 0, endOffset: 7, createdMs: clock.ms, hashes: hashRun(5, 0, 8) }], clock.ms);
  t.is(cache.prepare(1, 60), 'ready');
  t.is(cache.verifiedFor(1, hashAt(2, 1), 1), 7);
  t.is(cache.stats.suppressions, 0);
});

test('overlap: base <= verifiedUpto marks the entry for a full rebuild', (t) => {
  const { cache, clock } = freshCache();
  hydrate(
    cache,
    1,
    60,
    9,
    0,
    makeRows(1, 10, 5, () => clock.ms),
    clock.ms,
  );
  cache.recordAppend(1, 9, hashAt(3, 0), 1, clock.ms);
  t.like(cache.entryInfo(1), { state: 'rebuild' });
  t.is(cache.stats.rebuildsMarked, 1);
  t.is(cache.verifiedFor(1, hashAt(3, 1), 1), -1);
  t.is(cache.prepare(1, 60), 'hydrate');
});

test('an unknown push outcome marks the entry for a full rebuild', (t) => {
  const { cache, clock } = freshCache();
  hydrate(
    cache,
    1,
    60,
    9,
    0,
    makeRows(1, 10, 5, () => clock.ms),
    clock.ms,
  );
  cache.recordUnknown(1);
  t.like(cache.entryInfo(1), { state: 'rebuild' });
  t.is(cache.verifiedFor(1, hashAt(3, 1), 1), -1);
  t.is(cache.prepare(1, 60), 'hydrate');
  cache.recordUnknown(42); // not resident: ignored
  t.is(cache.stats.rebuildsMarked, 1);
});

test('window change forces a rehydration, sticky until an install with the new window', (t) => {
  const { cache, clock } = freshCache();
  hydrate(
    cache,
    1,
    30,
    9,
    0,
    makeRows(1, 10, 5, () => clock.ms),
    clock.ms,
  );
  t.is(cache.prepare(1, 30), 'ready');
  t.is(cache.prepare(1, 3600), 'hydrate');
  t.is(cache.prepare(1, 30), 'hydrate', 'sticky even if the old window is seen again');
  t.is(cache.verifiedFor(1, hashAt(9, 0), 1), -1);
  t.is(cache.prepare(1, 3600), 'hydrate');
  cache.install(
    1,
    3600,
    9,
    0,
    makeRows(1, 10, 5, () => clock.ms),
    clock.ms,
  );
  t.is(cache.prepare(1, 3600), 'ready');
  t.is(cache.verifiedFor(1, hashAt(9, 0), 1), 9);
  t.like(cache.entryInfo(1), { windowSeconds: 3600 });
  t.is(cache.stats.rebuildsMarked, 1);
});

test('window 0 (dedup off): never hydrates, answers -1, and is not counted as a suppression', (t) => {
  const { cache, clock } = freshCache();
  hydrate(
    cache,
    1,
    30,
    9,
    0,
    makeRows(1, 10, 5, () => clock.ms),
    clock.ms,
  );
  t.is(cache.prepare(1, 0), 'suppressed');
  t.is(cache.entryInfo(1), undefined);
  t.is(cache.verifiedFor(1, hashAt(9, 0), 1), -1);
  t.is(cache.stats.suppressions, 0);
  t.is(cache.suppressedCount(), 0);
  cache.install(1, 0, 9, 0, [], clock.ms);
  t.is(cache.entryInfo(1), undefined, 'an install with window 0 installs nothing');
  t.is(cache.prepare(1, 30), 'hydrate', 'turned back on: a full rehydration');
});

test('single-flight: a partition cannot be flushed twice at once', (t) => {
  const { cache } = freshCache();
  cache.beginFlush(1);
  cache.beginFlush(2);
  t.throws(() => cache.beginFlush(1), { message: /single-flight/ });
  cache.endFlush(1);
  t.notThrows(() => cache.beginFlush(1));
});

test('a hit anywhere in the window routes to -1; 200 000 absent hashes all vouch', (t) => {
  const { cache, clock } = freshCache();
  const n = 20 * BLOCK_HASHES + 123;
  const rows = makeRows(1, n, 1000, (r) => clock.ms - 3_000_000 + r * 1000);
  cache.install(1, 3600, n - 1, 0, rows, clock.ms);
  const info = cache.entryInfo(1)!;
  t.true(info.units === 21 && info.pages >= 2, `${info.units} units, ${info.pages} pages`);
  for (const at of [0, 4095, 4096, 50_000, 81_919, n - 1]) {
    t.is(cache.verifiedFor(1, hashRun(1, at, 1), 1), -1, `offset ${at}`);
  }
  const absent = hashRun(2, 0, 200_000);
  t.is(cache.verifiedFor(1, absent, 200_000), n - 1);
  const s = cache.stats;
  t.is(s.localHits, 6);
  t.is(s.localMisses, 200_000);
});

test('resident bytes per hash at a full 300-unit window stay <= 22.5 (the occurrence table: 8 B a slot at 0.5-0.75 load)', (t) => {
  const { cache, clock } = freshCache(new FakeClock(), 1024 * MB);
  const n = 300 * BLOCK_HASHES;
  // A 300 s window at a steady 4096 hashes/s.
  const rows = makeRows(3, n, 1024, (r) => clock.ms - 300_000 + r * 250);
  cache.install(1, 300, n - 1, 0, rows, clock.ms);
  const perHash = cache.residentBytes() / cache.residentHashes();
  t.log(
    `${cache.residentHashes()} hashes, ${(cache.residentBytes() / MB).toFixed(2)} MiB, ${perHash.toFixed(3)} B/hash, ${cache.entryInfo(1)!.pages} table pages`,
  );
  t.true(perHash <= 22.5);
});

test('two hashes sharing their first word: each finds both occurrences (names SQL then refutes), and a hash with another first word finds neither', (t) => {
  const { cache, clock } = freshCache();
  // A and B share the table's key (the first 4 bytes) but differ in the rest.
  const a = hashAt(1, 0);
  const b = Buffer.from(a);
  b.writeUInt32BE((a.readUInt32BE(12) ^ 1) >>> 0, 12);
  const n = 4096 + 100;
  const hashes = hashRun(2, 0, n);
  a.copy(hashes, 0);
  b.copy(hashes, 4096 * 16);
  cache.install(1, 60, n - 1, 0, [{ baseOffset: 0, endOffset: n - 1, createdMs: clock.ms, hashes }], clock.ms);
  t.is(cache.verifiedFor(1, a, 1), -1);
  const hinted = cache.vouchWithHints(1, a, 1);
  t.is(hinted.verified, n - 1, 'a hit is hinted, not -1');
  t.deepEqual(hinted.hits, [{ index: 0, offsets: [0, 4096] }], 'every occurrence of the key is named');
  const c = Buffer.from(a);
  c.writeUInt32BE((a.readUInt32BE(0) ^ 1) >>> 0, 0);
  t.is(cache.verifiedFor(1, c, 1), n - 1, 'another first word: no hit');
});
