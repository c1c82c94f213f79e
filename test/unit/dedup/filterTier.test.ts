import test from 'ava';
import { DedupCache, estimateFootprintBytes, type TxnRow } from '../../../src/dedup/index.js';
import {
  FILTER_BITS_PER_HASH,
  FILTER_MAX_GENERATIONS,
  FILTER_MIN_BITS_PER_HASH,
  PROMOTE_INTERVAL_MS,
  SKEW_SLACK_MS,
} from '../../../src/dedup/constants.js';
import { FakeClock, hashAt, hashRun } from './helpers.js';

// The filter tier's memory policy (src/dedup/cache.ts: fitFilter, demote,
// foldToFree, promotion and refresh): coverage before names. The exact
// tier's own fit test, cooldown and guard: memoryPressure.test.ts.

const KiB = 1024;

interface Part {
  last: number;
  rows: TxnRow[];
}

const partOf = (stream: number, size: number, createdMs: number): Part => ({
  last: size - 1,
  rows: [{ baseOffset: 0, endOffset: size - 1, createdMs, hashes: hashRun(stream, 0, size) }],
});

/**
 * One flush of pid as CacheWatermarks drives the cache: prepare, hydrate if
 * told to (admission first), vouch with hints for one new hash, then report
 * its append. Returns whether it hydrated and the vouch.
 */
function flush(cache: DedupCache, clock: FakeClock, pid: number, part: Part, window = 3600): { hydrated: boolean; verified: number } {
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
    const { verified } = cache.vouchWithHints(pid, h, 1);
    const base = part.last + 1;
    part.rows.push({ baseOffset: base, endOffset: base, createdMs: clock.ms, hashes: h });
    part.last = base;
    cache.recordAppend(pid, base, h, 1, clock.ms);
    return { hydrated, verified };
  } finally {
    cache.endFlush(pid);
  }
}

/**
 * Partitions of `size` hashes (stream 100 + index), added from parts.length
 * on and flushed one by one until one is suppressed: returns its index (-1
 * if none was by `limit`).
 */
function addUntilSuppressed(cache: DedupCache, clock: FakeClock, parts: Part[], size: number, limit = 400): number {
  for (let p = parts.length; p < limit; p++) {
    parts.push(partOf(100 + p, size, clock.ms));
    clock.advance(10);
    if (flush(cache, clock, p, parts[p]!).verified === -1) return p;
  }
  return -1;
}

/** Every stored hash of the part, one segment: the items a vouch of pid must not clear. */
const stored = (part: Part): Buffer => Buffer.concat(part.rows.map((r) => r.hashes));

test('thousands of partitions round-robin at a tiny cap: every one vouches from a filter, nothing is suppressed, nothing rebuilt twice', (t) => {
  const clock = new FakeClock();
  const capBytes = 4 * 1024 * KiB;
  const cache = new DedupCache({ capBytes, now: clock.now });
  const P = 3000;
  const size = 200;
  const parts = Array.from({ length: P }, (_, p) => partOf(p, size, clock.ms));
  const rounds = 30;
  const hydrationsPerRound: number[] = [];
  let vouchedLastRound = 0;
  for (let r = 0; r < rounds; r++) {
    let hydrations = 0;
    vouchedLastRound = 0;
    for (let p = 0; p < P; p++) {
      clock.advance(1);
      const res = flush(cache, clock, p, parts[p]!);
      if (res.hydrated) hydrations++;
      if (res.verified !== -1) vouchedLastRound++;
      if (cache.residentBytes() > capBytes) t.fail(`resident ${cache.residentBytes()} over the cap`);
    }
    hydrationsPerRound.push(hydrations);
  }
  t.log(`hydrations per round: ${hydrationsPerRound.join(' ')}; stats ${JSON.stringify(cache.stats)}; bits ${cache.filterBitsPerHash()}`);
  // The exact tier holds ~900 of these; the rest are filters, demoting
  // exact entries as they come (coverage first).
  t.is(cache.residentPartitions(), P);
  t.is(vouchedLastRound, P, 'every partition vouches');
  t.is(cache.suppressedCount(), 0);
  t.is(cache.stats.suppressions, 0);
  t.is(cache.stats.evictions, 0);
  t.true(cache.stats.filterInstalls > 0 && cache.residentFilterEntries() > 0);
  t.deepEqual(hydrationsPerRound.slice(1), new Array(rounds - 1).fill(0), 'no rebuild after the first round');
  for (const p of [0, 1499, 2999]) {
    const { verified, maybe, hits } = cache.vouchWithHints(p, stored(parts[p]!), parts[p]!.last + 1);
    t.true(verified >= 0);
    // Every hash it holds is either named (exact) or maybe (filter): none is cleared.
    t.is(maybe.length + hits.length, parts[p]!.last + 1, `partition ${p} clears none of its own hashes`);
  }
});

test('coverage first: a partition the exact tier cannot admit gets a filter, and an exact entry is demoted rather than evicted to make room', (t) => {
  const clock = new FakeClock();
  const one = estimateFootprintBytes(5000);
  // Two exact entries and a little room: not enough for a third filter of 5 000 hashes.
  const cache = new DedupCache({ capBytes: Math.ceil((2.02 * one) / 0.9), now: clock.now });
  const parts = [1, 2, 3].map((s) => partOf(s, 5000, clock.ms));
  t.true(flush(cache, clock, 1, parts[0]!).hydrated);
  t.true(flush(cache, clock, 2, parts[1]!).hydrated);
  t.is(cache.entryInfo(1)?.tier, 'exact');
  t.is(cache.entryInfo(2)?.tier, 'exact');
  clock.advance(1000);
  const third = flush(cache, clock, 3, parts[2]!);
  t.true(third.hydrated);
  t.true(third.verified >= 0, 'the newcomer vouches');
  t.is(cache.entryInfo(3)?.tier, 'filter');
  t.is(cache.entryInfo(1)?.tier, 'filter', 'the least recently used exact entry was demoted');
  t.is(cache.entryInfo(2)?.tier, 'exact');
  t.like(cache.stats, { demotions: 1, evictions: 0, suppressions: 0 });
  // The demoted entry still vouches, and names none of its hashes cleared.
  const v = cache.vouchWithHints(1, stored(parts[0]!), parts[0]!.last + 1);
  t.true(v.verified >= 0);
  t.is(v.hits.length, 0);
  t.is(v.maybe.length, parts[0]!.last + 1, 'every hash it held is a maybe');
  t.true(cache.residentBytes() <= 0.9 * Math.ceil((2.02 * one) / 0.9));
});

test('heavier pressure lowers the bits filters are built with and folds the larger ones, never below the floor; past it a partition is suppressed', (t) => {
  const clock = new FakeClock();
  const size = 20_000;
  // 8 bits a hash (rounded up to a power of two of blocks: 32 KiB a filter) for 40 partitions is ~1.3 MB;
  // at 5 bits (16 KiB) they fit in 90 % of 900 KiB.
  const capBytes = 900 * KiB;
  const cache = new DedupCache({ capBytes, now: clock.now });
  const parts: Part[] = [];
  let p = 0;
  for (; p < 40; p++) {
    parts.push(partOf(100 + p, size, clock.ms));
    clock.advance(10);
    const r = flush(cache, clock, p, parts[p]!);
    t.true(r.hydrated && r.verified >= 0, `partition ${p} covered`);
  }
  t.log(`bits ${cache.filterBitsPerHash()}, stats ${JSON.stringify(cache.stats)}, resident ${cache.residentBytes()}`);
  t.true(cache.filterBitsPerHash() < FILTER_BITS_PER_HASH, 'the build density went down');
  t.true(cache.filterBitsPerHash() >= FILTER_MIN_BITS_PER_HASH);
  t.true(cache.stats.folds > 0, 'larger filters were folded');
  t.is(cache.stats.suppressions, 0);
  t.true(cache.residentBytes() <= capBytes);
  // Folded or not, no filter clears a hash it holds.
  for (let q = 0; q < 40; q += 7) {
    const v = cache.vouchWithHints(q, stored(parts[q]!), parts[q]!.last + 1);
    t.is(v.maybe.length + v.hits.length, parts[q]!.last + 1, `partition ${q} clears none of its own hashes`);
  }
  // Keep adding partitions: at the floor density the budget runs out and the newcomer is suppressed.
  const suppressedAt = addUntilSuppressed(cache, clock, parts, size);
  t.true(suppressedAt > 40, `suppressed from partition ${suppressedAt}`);
  t.is(cache.filterBitsPerHash(), FILTER_MIN_BITS_PER_HASH);
  t.true(cache.stats.suppressions > 0);
  t.true(cache.residentBytes() <= capBytes);
});

test('filters level to the budget: admitted one after another, they end near the density it affords, using most of it', (t) => {
  const clock = new FakeClock();
  const size = 20_000;
  const capBytes = 900 * KiB;
  const cache = new DedupCache({ capBytes, now: clock.now });
  t.is(cache.residentFilterBitsPerHash(), undefined, 'no filter, no density');
  const parts: Part[] = [];
  for (let p = 0; p < 40; p++) {
    parts.push(partOf(100 + p, size, clock.ms));
    clock.advance(10);
    t.true(flush(cache, clock, p, parts[p]!).hydrated, `partition ${p} covered`);
  }
  let bits = 0;
  let hashes = 0;
  const perEntry: number[] = [];
  for (let p = 0; p < 40; p++) {
    const e = cache.entryInfo(p)!;
    t.is(e.tier, 'filter');
    bits += e.pages * 512;
    hashes += e.hashes;
    perEntry.push((e.pages * 512) / e.hashes);
  }
  // What 90 % of the cap (the admission budget) affords each hash if all
  // were alike. Folding every filter at each step of the build density (the
  // rule before) ended at 5.4 bits a hash against 8.3 here, with a third of
  // the cap unused.
  t.is(cache.residentFilterBitsPerHash(), bits / hashes, 'the gauge reads what the entries hold');
  const affords = (0.9 * capBytes * 8) / hashes;
  t.log(
    `mean ${(bits / hashes).toFixed(2)} bits a hash (affords ${affords.toFixed(2)}), entries ${Math.min(...perEntry).toFixed(2)}..${Math.max(...perEntry).toFixed(2)}, resident ${cache.residentBytes()} of ${capBytes}, stats ${JSON.stringify(cache.stats)}`,
  );
  t.true(bits / hashes >= 0.8 * affords, 'the filters hold most of the bits the budget affords');
  t.true(cache.residentBytes() >= 0.8 * capBytes, 'most of the cap is used');
  t.true(cache.residentBytes() <= capBytes);
  // Within a fold of one another (and the rounding of a size): no filter
  // was halved while one at less than half its density could be.
  t.true(Math.max(...perEntry) <= 2 * 1.125 * Math.min(...perEntry) + 0.01, 'densities within a fold');
  for (let q = 0; q < 40; q += 7) {
    const v = cache.vouchWithHints(q, stored(parts[q]!), parts[q]!.last + 1);
    t.is(v.maybe.length + v.hits.length, parts[q]!.last + 1, `partition ${q} clears none of its own hashes`);
  }
});

test("a folded filter keeps a build's growth headroom: appends of a fifth of its hashes ask no filter to be refetched", (t) => {
  const clock = new FakeClock();
  const size = 20_000;
  const cache = new DedupCache({ capBytes: 900 * KiB, now: clock.now });
  const parts: Part[] = [];
  for (let p = 0; p < 40; p++) {
    parts.push(partOf(100 + p, size, clock.ms));
    clock.advance(10);
    t.true(flush(cache, clock, p, parts[p]!).hydrated);
  }
  t.true(cache.stats.folds > 0, 'pressure folded filters');
  // A fifth of each partition's hashes appended (less than FILTER_GROWTH, a
  // quarter), then the retier interval: an overloaded filter would ask to
  // be refetched now (a fetch of its whole window).
  const more = size / 5;
  for (let p = 0; p < 40; p++) {
    const part = parts[p]!;
    cache.beginFlush(p);
    t.is(cache.prepare(p, 3600), 'ready');
    cache.recordAppend(p, part.last + 1, hashRun(100 + p, 1_000_000, more), more, clock.ms);
    cache.endFlush(p);
    part.last += more;
  }
  clock.advance(PROMOTE_INTERVAL_MS + 1);
  const refetch = parts
    .map((_, p) => p)
    .filter((p) => {
      cache.beginFlush(p);
      try {
        return cache.prepare(p, 3600) === 'hydrate';
      } finally {
        cache.endFlush(p);
      }
    });
  t.deepEqual(refetch, [], `bits ${cache.filterBitsPerHash()}, stats ${JSON.stringify(cache.stats)}`);
});

test('promotion: a filter entry becomes exact again once its exact entry fits with room to spare; until then it stays a filter and vouches', (t) => {
  const clock = new FakeClock();
  const one = estimateFootprintBytes(5000);
  const cache = new DedupCache({ capBytes: Math.ceil((2.02 * one) / 0.9), now: clock.now });
  const parts = [1, 2, 3].map((s) => partOf(s, 5000, clock.ms));
  flush(cache, clock, 1, parts[0]!);
  flush(cache, clock, 2, parts[1]!);
  clock.advance(1000);
  flush(cache, clock, 3, parts[2]!);
  t.is(cache.entryInfo(1)?.tier, 'filter');
  // Exact still does not fit: the filter stays and vouches.
  clock.advance(PROMOTE_INTERVAL_MS + 1);
  const refused = flush(cache, clock, 1, parts[0]!);
  t.false(refused.hydrated);
  t.true(refused.verified >= 0);
  t.is(cache.entryInfo(1)?.tier, 'filter');
  // Partition 2's dedup is switched off: its entry goes, and 1 fits as exact with room to spare.
  cache.beginFlush(2);
  t.is(cache.prepare(2, 0), 'suppressed');
  cache.endFlush(2);
  clock.advance(1000);
  const promoted = flush(cache, clock, 1, parts[0]!);
  t.true(promoted.hydrated);
  t.is(cache.entryInfo(1)?.tier, 'exact');
  const v = cache.vouchWithHints(1, stored(parts[0]!), parts[0]!.last + 1);
  t.is(v.hits.length, parts[0]!.last + 1, 'promoted: every stored hash is named again');
  t.is(v.maybe.length, 0);
});

test('an overloaded filter grows generations without a fetch; with no generation left to grow it is rebuilt, larger, as one filter holding every hash', (t) => {
  const clock = new FakeClock();
  const one = estimateFootprintBytes(5000);
  const cache = new DedupCache({ capBytes: Math.ceil((1.2 * one) / 0.9), now: clock.now });
  const big = partOf(1, 5000, clock.ms);
  flush(cache, clock, 1, big);
  const small = partOf(2, 2000, clock.ms);
  clock.advance(10);
  flush(cache, clock, 2, small);
  t.is(cache.entryInfo(2)?.tier, 'filter');
  t.is(cache.entryInfo(2)?.generations, 1);
  const blocks0 = cache.entryInfo(2)!.pages;
  // Appends, one a flush, past what the filter was built for: generations
  // open in place (no hydration) until FILTER_MAX_GENERATIONS, then a
  // refresh (a fetch of the window) rebuilds one filter.
  let hydratedAt = -1;
  let grownTo = 1;
  for (let i = 0; i < 40_000 && hydratedAt < 0; i++) {
    clock.advance(10);
    const { hydrated } = flush(cache, clock, 2, small);
    if (hydrated) hydratedAt = i;
    else {
      const e = cache.entryInfo(2)!;
      grownTo = Math.max(grownTo, e.generations);
      // Grown at full density: every generation but the first sets DENSE_K bits a hash.
      if (e.denseGenerations !== e.generations - 1) return t.fail(`${e.denseGenerations} dense of ${e.generations} generations`);
    }
  }
  t.is(cache.filterBitsPerHash(), FILTER_BITS_PER_HASH);
  t.is(grownTo, FILTER_MAX_GENERATIONS, 'grew to the most generations before any refetch');
  t.is(cache.stats.filterGrowths, FILTER_MAX_GENERATIONS - 1);
  t.true(hydratedAt > 0, `refreshed after ${hydratedAt} appends`);
  t.is(cache.entryInfo(2)?.tier, 'filter');
  t.is(cache.entryInfo(2)?.generations, 1, 'the refresh built one filter');
  t.true(cache.entryInfo(2)!.pages > blocks0, `rebuilt larger (${blocks0} -> ${cache.entryInfo(2)!.pages} blocks)`);
  t.is(cache.stats.suppressions, 0);
  const v = cache.vouchWithHints(2, stored(small), small.last + 1);
  t.is(v.maybe.length, small.last + 1, 'the rebuilt filter holds every hash');
  t.is(cache.entryInfo(2)?.denseGenerations, 0, 'a refresh builds with K');
});

test('a maybe item comes with the span of the generations that may hold it: each stored hash lies in its span, and one only an older generation holds ends below the newest', (t) => {
  const clock = new FakeClock();
  const one = estimateFootprintBytes(5000);
  const cache = new DedupCache({ capBytes: Math.ceil((1.2 * one) / 0.9), now: clock.now });
  flush(cache, clock, 1, partOf(1, 5000, clock.ms));
  const part = partOf(2, 2000, clock.ms);
  clock.advance(10);
  flush(cache, clock, 2, part);
  t.is(cache.entryInfo(2)?.tier, 'filter');
  // Appends, one a flush, until the filter has grown a third generation.
  let i = 0;
  while (cache.entryInfo(2)!.generations < 3 && i++ < 40_000) {
    clock.advance(10);
    flush(cache, clock, 2, part);
  }
  t.is(cache.entryInfo(2)!.generations, 3, `three generations after ${i} appends`);
  // A few appends more, into the generation just opened.
  for (let k = 0; k < 5; k++) {
    clock.advance(10);
    flush(cache, clock, 2, part);
  }
  t.is(cache.entryInfo(2)!.generations, 3);
  // Every stored hash, in offset order: item k was stored at offset k.
  const n = part.last + 1;
  const v = cache.vouchWithHints(2, stored(part), n);
  t.true(v.verified >= 0);
  t.is(v.maybe.length, n, 'every stored hash is a maybe');
  const spans = v.spans!;
  t.is(spans.from.length, n);
  t.is(spans.to.length, n);
  let outside = 0;
  let boundedOld = 0;
  v.maybe.forEach((off, k) => {
    if (!(spans.from[k]! <= off && off <= spans.to[k]!)) outside++;
    if (off < 2000 && spans.to[k] !== Infinity) boundedOld++;
  });
  t.is(outside, 0, 'no stored hash lies outside its span');
  // The window fetch's hashes are in the oldest generation: their span ends
  // where it was sealed, unless a newer one answers maybe too (a false
  // positive, a few in a hundred at these densities).
  t.true(boundedOld > 1800, `${boundedOld} of the 2 000 fetched hashes end below the newest generation`);
  const newest = v.maybe.filter((off, k) => off === part.last && spans.to[k] === Infinity).length;
  t.is(newest, 1, 'the last append is in the generation appends go to: no upper bound');
  t.true(cache.stats.maybeBelowOpen >= boundedOld, 'the bounded spans are counted');
});

test('generations grown near the cap are built sparser to fit, after demoting what is exact; no filter is folded for them', (t) => {
  const clock = new FakeClock();
  const size = 20_000;
  const capBytes = 3 * 1024 * KiB;
  const cache = new DedupCache({ capBytes, now: clock.now });
  const parts: Part[] = [];
  for (let p = 0; p < 40; p++) {
    parts.push(partOf(100 + p, size, clock.ms));
    clock.advance(10);
    t.true(flush(cache, clock, p, parts[p]!).hydrated);
  }
  const folds = cache.stats.folds;
  const bits = cache.filterBitsPerHash();
  t.is(bits, FILTER_BITS_PER_HASH);
  // Half as many hashes again to every partition: at 16 bits their new
  // generations would need more than the budget has left.
  const more = size / 2;
  for (let p = 0; p < 40; p++) {
    cache.beginFlush(p);
    t.is(cache.prepare(p, 3600), 'ready');
    cache.recordAppend(p, parts[p]!.last + 1, hashRun(100 + p, 1_000_000, more), more, clock.ms);
    cache.endFlush(p);
    parts[p]!.last += more;
  }
  const info = `bits ${bits} -> ${cache.filterBitsPerHash()}, resident ${cache.residentBytes()}, ${JSON.stringify(cache.stats)}`;
  t.true(cache.stats.filterGrowths > 0, info);
  t.is(cache.residentFilterEntries(), 40, `every partition a filter: ${info}`);
  t.is(cache.stats.folds, folds, `no fold to make room for a generation: ${info}`);
  t.true(
    cache.filterBitsPerHash() < bits && cache.filterBitsPerHash() > FILTER_MIN_BITS_PER_HASH,
    `new generations built sparser: ${info}`,
  );
  t.true(cache.residentBytes() <= capBytes, info);
  t.is(cache.stats.evictions, 0);
  // Generations grown after the density fell set K bits a hash, not DENSE_K.
  let dense = 0;
  for (let p = 0; p < 40; p++) dense += cache.entryInfo(p)!.denseGenerations;
  t.true(dense < cache.stats.filterGrowths, `${dense} dense generations: ${info}`);
  for (let p = 0; p < 40; p++) {
    const all = hashRun(100 + p, 0, size);
    const added = hashRun(100 + p, 1_000_000, more);
    t.is(cache.vouchWithHints(p, all, size).maybe.length, size, `partition ${p}: every hydrated hash is a maybe`);
    t.is(cache.vouchWithHints(p, added, more).maybe.length, more, `partition ${p}: every appended hash is a maybe`);
  }
});

test('with no room for a generation at any density, a filter does not grow: it evicts no one and asks for a refresh instead', (t) => {
  const clock = new FakeClock();
  const size = 20_000;
  const capBytes = 900 * KiB;
  const cache = new DedupCache({ capBytes, now: clock.now });
  const parts: Part[] = [];
  // Partitions until one is suppressed: the budget is spent at the floor density.
  t.true(addUntilSuppressed(cache, clock, parts, size) > 0);
  t.is(cache.filterBitsPerHash(), FILTER_MIN_BITS_PER_HASH);
  const evictions = cache.stats.evictions;
  // Half as many hashes again to each resident filter in turn overloads
  // it: the first generations take what room is left, then one finds none.
  const more = size / 2;
  let q = -1;
  for (let r = 0; r < parts.length && q < 0; r++) {
    if (cache.entryInfo(r)?.tier !== 'filter') continue;
    cache.beginFlush(r);
    t.is(cache.prepare(r, 3600), 'ready');
    cache.recordAppend(r, parts[r]!.last + 1, hashRun(100 + r, 1_000_000, more), more, clock.ms);
    cache.endFlush(r);
    parts[r]!.last += more;
    if (cache.entryInfo(r)!.generations === 1) q = r;
  }
  const info = `resident ${cache.residentBytes()}, ${JSON.stringify(cache.stats)}`;
  t.true(q >= 0, `a filter found no room for a generation: ${info}`);
  t.true(cache.stats.filterGrowths > 0, info);
  t.is(cache.stats.evictions, evictions, `no one evicted for a generation: ${info}`);
  t.true(cache.residentBytes() <= capBytes);
  clock.advance(PROMOTE_INTERVAL_MS + 1);
  cache.beginFlush(q);
  t.is(cache.prepare(q, 3600), 'hydrate', 'the overloaded filter asks for a refresh');
  cache.endFlush(q);
  const v = cache.vouchWithHints(q, hashRun(100 + q, 1_000_000, more), more);
  t.true(v.verified >= 0, 'it still vouches');
  t.is(v.maybe.length, more, 'every appended hash is a maybe');
});

test('a sealed generation is dropped once expiry passes every hash it holds; every in-window hash still answers maybe', (t) => {
  const clock = new FakeClock();
  const window = 60;
  const one = estimateFootprintBytes(5000);
  const cache = new DedupCache({ capBytes: Math.ceil((1.2 * one) / 0.9), now: clock.now });
  flush(cache, clock, 1, partOf(1, 5000, clock.ms), window);
  const part = partOf(2, 2000, clock.ms);
  clock.advance(10);
  flush(cache, clock, 2, part, window);
  t.is(cache.entryInfo(2)?.tier, 'filter');
  // Appends within the window until the filter has grown a generation.
  let i = 0;
  while (cache.entryInfo(2)!.generations < 2 && i++ < 5000) {
    clock.advance(1);
    flush(cache, clock, 2, part, window);
  }
  t.is(cache.entryInfo(2)!.generations, 2, `grew after ${i} appends`);
  const sealedUpto = part.last;
  // A window and its slack later, appends (each flush runs expiry) move H
  // past the sealed generation's last offset: it is dropped.
  clock.advance(window * 1000 + SKEW_SLACK_MS + 1);
  let j = 0;
  while (cache.entryInfo(2)!.generations > 1 && j++ < 10_000) {
    clock.advance(1);
    flush(cache, clock, 2, part, window);
  }
  t.is(cache.entryInfo(2)!.generations, 1, `dropped after ${j} more appends`);
  t.true(cache.stats.filterGenerationsExpired >= 1);
  t.true(cache.entryInfo(2)!.hydratedFrom >= sealedUpto, 'H is at or past what the dropped generation held');
  // Every hash still in the window (above H) is a maybe.
  const inWindow = part.rows.filter((r) => r.baseOffset > cache.entryInfo(2)!.hydratedFrom);
  const hashes = Buffer.concat(inWindow.map((r) => r.hashes));
  const n = hashes.length / 16;
  t.true(n > 0);
  const v = cache.vouchWithHints(2, hashes, n);
  t.true(v.verified >= 0);
  t.is(v.maybe.length, n);
});

test('a refused partition past its cooldown is not fetched again while the cache has no room for anyone; it is once an entry leaves', (t) => {
  const clock = new FakeClock();
  const size = 20_000;
  const capBytes = 900 * KiB;
  const cache = new DedupCache({ capBytes, now: clock.now });
  const parts: Part[] = [];
  let refused = -1;
  for (let p = 0; p < 400 && refused < 0; p++) {
    parts.push(partOf(100 + p, size, clock.ms));
    clock.advance(10);
    if (flush(cache, clock, p, parts[p]!).verified === -1) refused = p;
  }
  t.true(refused > 0, 'the budget ran out');
  const resident = parts.slice(0, refused).map((_, p) => p);
  // The resident partitions stay in use (their guards hold), past the refused one's cooldown.
  for (let s = 0; s < 8; s++) {
    clock.advance(4_000);
    for (const p of resident) flush(cache, clock, p, parts[p]!);
  }
  const suppressions = cache.stats.suppressions;
  t.is(cache.prepare(refused, 3600), 'suppressed', 'no room: no fetch for a re-test');
  t.is(cache.stats.suppressions, suppressions + 1, 'counted as a suppression');
  clock.advance(30_001);
  for (const p of resident) flush(cache, clock, p, parts[p]!);
  t.is(cache.prepare(refused, 3600), 'suppressed', 'still none after the renewed cooldown');
  // An entry leaves (its queue's dedup turned off): there is room to re-test.
  t.is(cache.prepare(resident[0]!, 0), 'suppressed');
  clock.advance(30_001);
  t.is(cache.prepare(refused, 3600), 'hydrate');
});
