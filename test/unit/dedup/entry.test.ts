import test from 'ava';
import { UNIT_HASHES } from '../../../src/dedup/constants.js';
import { PartitionEntry, type LocalHit, type LookupStats } from '../../../src/dedup/entry.js';
import { foldCost, PresenceFilter } from '../../../src/dedup/presenceFilter.js';
import { hashRun } from './helpers.js';

const stats = (): LookupStats => ({ localHits: 0, localMisses: 0 });

test('hydration sizes the table up front, never allocates over 64 KiB, knows every hash, and groups offsets in units of 4096', (t) => {
  const n = 70 * UNIT_HASHES + 5;
  const hashes = hashRun(1, 0, n);
  const e = PartitionEntry.hydrate(3600, n - 1, 0, [{ baseOffset: 0, endOffset: n - 1, createdMs: 0, hashes }], 0);
  t.is(e.unitCount, 71);
  t.is(e.openUnitHashes, 5);
  t.is(e.hashCount, n);
  for (const a of e.table.arrays()) t.true(a.byteLength <= 65536, `page of ${a.byteLength} bytes`);
  t.is(e.table.invariantViolation(), undefined);
  for (let i = 0; i < n; i += 97) t.true(e.knows(hashes, i * 16), `hash ${i}`);
  t.true(e.knows(hashes, (n - 1) * 16));
  t.false(e.knows(hashRun(2, 0, 1)));
});

test('local hits name every occurrence, and only occurrences of hashes with the same first word (against a model; hydrated window, live appends, recurring hashes)', (t) => {
  const hydrated = 70_000;
  const pool = hashRun(11, 0, 5_000);
  /** offset -> stored hash (hex); hash -> its offsets */
  const at: string[] = [];
  const model = new Map<string, number[]>();
  const stream = (first: number, count: number): Buffer => {
    const out = hashRun(12, first, count);
    for (let k = 0; k < count; k++) {
      const o = first + k;
      // Every 37th offset re-uses a pooled hash: it recurs across units.
      if (o % 37 === 0) pool.copy(out, k * 16, ((o / 37) % 5_000) * 16, ((o / 37) % 5_000) * 16 + 16);
      const key = out.subarray(k * 16, k * 16 + 16).toString('hex');
      at[o] = key;
      model.set(key, [...(model.get(key) ?? []), o]);
    }
    return out;
  };
  const e = PartitionEntry.hydrate(
    3600,
    hydrated - 1,
    0,
    [{ baseOffset: 0, endOffset: hydrated - 1, createdMs: 1000, hashes: stream(0, hydrated) }],
    1000,
  );
  let base = hydrated;
  for (let i = 0; i < 80; i++) {
    t.is(e.append(base, stream(base, 4096), 4096, 2000), 'appended');
    base += 4096;
  }
  const s = stats();
  let checked = 0;
  let sharedKey = 0;
  for (let q = 0; q < 40; q++) {
    // 200 items: stored hashes (single and recurring), absent ones, and one item twice.
    const items = Buffer.alloc(200 * 16);
    for (let k = 0; k < 200; k++) {
      const pick = (Math.imul(q * 200 + k, 0x9e3779b1) >>> 0) % 4;
      if (pick === 0) hashRun(13, q * 200 + k, 1).copy(items, k * 16);
      else if (pick === 1) pool.copy(items, k * 16, ((q * 7 + k) % 5_000) * 16, ((q * 7 + k) % 5_000) * 16 + 16);
      else hashRun(12, (Math.imul(q + 1, k + 17) >>> 0) % base, 1).copy(items, k * 16);
    }
    items.copy(items, 199 * 16, 3 * 16, 4 * 16);
    const hits: LocalHit[] = [];
    e.collectHits(items, 200, s, hits);
    const got = new Map(hits.map((h) => [h.index, h.offsets]));
    for (let k = 0; k < 200; k++) {
      const item = items.subarray(k * 16, k * 16 + 16);
      const want = model.get(item.toString('hex')) ?? [];
      const have = got.get(k) ?? [];
      for (let j = 1; j < have.length; j++)
        if (!(have[j - 1]! < have[j]!)) t.fail(`query ${q} item ${k}: offsets not ascending and distinct`);
      for (const o of want) if (!have.includes(o)) t.fail(`query ${q} item ${k}: occurrence at ${o} not named`);
      for (const o of have) {
        if (want.includes(o)) continue;
        // Not this hash: only another hash with the same first word may be named.
        if (at[o]!.slice(0, 8) !== item.toString('hex').slice(0, 8)) t.fail(`query ${q} item ${k}: ${o} holds an unrelated hash`);
        sharedKey++;
      }
      checked += want.length;
    }
  }
  t.true(checked > 5_000, `${checked} occurrences checked`);
  t.true(s.localHits > 0 && s.localMisses > 0);
  t.log(`${checked} occurrences named; ${sharedKey} extra names of hashes sharing a first word`);
});

test('after an expiry forgets a part-filled unit, later appends are found and units restart at the next offset', (t) => {
  // Window 1 s: 500 hashes at t = 0, an expiry at t = 10 s forgets them; the next 8 000 arrive at t = 10 s.
  const e = PartitionEntry.hydrate(1, -1, 0, [], 0);
  t.is(e.append(0, hashRun(31, 0, 500), 500, 0), 'appended');
  e.expire(10_000);
  t.is(e.hashCount, 0);
  t.is(e.hydratedFrom, 499);
  t.false(e.knows(hashRun(31, 0, 1)), 'forgotten hashes are not named');
  const n = 8_000;
  const hashes = hashRun(32, 0, n);
  t.is(e.append(500, hashes, n, 10_000), 'appended');
  t.is(e.unitCount, 2);
  t.is(e.openUnitHashes, n - UNIT_HASHES);
  const s = stats();
  for (let a = 0; a < n; a += 250) {
    const hits: LocalHit[] = [];
    e.collectHits(hashes.subarray(a * 16, (a + 250) * 16), 250, s, hits);
    t.deepEqual(
      hits.map((h) => [h.index, [...h.offsets]]),
      Array.from({ length: 250 }, (_, k) => [k, [500 + a + k]]),
    );
    t.true(e.anyLocalHit(hashes.subarray((a + 249) * 16, (a + 250) * 16), 1, s));
  }
});

test('a sliding window: memory follows the live set (dead entries are swept), and what expired is never named', (t) => {
  const e = PartitionEntry.hydrate(10, -1, 0, [], 0);
  let base = 0;
  let worst = 0;
  for (let i = 0; i < 600; i++) {
    const ms = i * 100; // 10 s window, 1 000 hashes per 100 ms: ~100 k live
    e.expire(ms);
    t.is(e.append(base, hashRun(40, base, 1000), 1000, ms), 'appended');
    base += 1000;
    if (i > 300) worst = Math.max(worst, e.bytes / e.hashCount);
  }
  t.log(`bytes per remembered hash over the steady window: worst ${worst.toFixed(2)}`);
  t.true(worst <= 22.5, `worst ${worst}`);
  t.is(e.table.invariantViolation(), undefined);
  // Offsets below hydratedFrom are pre-window: never named.
  t.false(e.knows(hashRun(40, 0, 1)));
  t.true(e.knows(hashRun(40, base - 1, 1)));
});

test('an append too far above the table base to store marks the entry for rebuild (range); it then ignores appends', (t) => {
  const e = PartitionEntry.hydrate(60, 9, 0, [{ baseOffset: 0, endOffset: 9, createdMs: 0, hashes: hashRun(1, 0, 10) }], 0);
  const far = 0x100000000;
  e.verifiedUpto = far - 1; // as if that many had been appended since
  t.is(e.append(far, hashRun(1, 10, 1), 1, 0), 'range');
  t.is(e.state, 'rebuild');
  t.is(e.rebuildReason, 'range');
  t.false(e.canVouch);
  t.is(e.append(far + 1, hashRun(1, 11, 1), 1, 0), 'ignored');
});

test('a fold takes the cheapest generation: a five-bit one before an eight-bit one near 10 bits a hash, the eight-bit one near 20', (t) => {
  /** A filter entry of `n` hydrated hashes at `bits0` (K), grown once into a DENSE_K generation holding `m` appended ones at `bits1`. */
  const entry = (n: number, bits0: number, m: number, bits1: number): PartitionEntry => {
    const rows = [{ baseOffset: 0, endOffset: n - 1, createdMs: 1000, hashes: hashRun(21, 0, n) }];
    const e = PartitionEntry.hydrate(3600, n - 1, 0, rows, 1000, 'filter', PresenceFilter.blocksFor(n, bits0));
    e.grow(PresenceFilter.blocksFor(m, bits1), m, PresenceFilter.DENSE_K);
    for (let base = n; base < n + m; base += 4096) {
      const count = Math.min(4096, n + m - base);
      t.is(e.append(base, hashRun(22, base, count), count, 2000), 'appended');
    }
    return e;
  };
  // Near 10 bits a hash: the eight-bit generation is the denser, and the dearer to fold.
  const low = entry(40_000, 10.5, 40_000, 11);
  const [k0, d0] = low.generationShapes();
  t.deepEqual([k0!.k, d0!.k], [PresenceFilter.K, PresenceFilter.DENSE_K]);
  t.true(d0!.bitsPerHash > k0!.bitsPerHash && k0!.bitsPerHash >= 10, JSON.stringify(low.generationShapes()));
  t.true(foldCost(k0!.bitsPerHash, PresenceFilter.K) < foldCost(d0!.bitsPerHash, PresenceFilter.DENSE_K));
  t.is(low.cheapestFoldCost(10), foldCost(k0!.bitsPerHash, PresenceFilter.K));
  t.true(low.foldCheapest(10) > 0);
  const [k1, d1] = low.generationShapes();
  t.is(k1!.bitsPerHash, k0!.bitsPerHash / 2);
  t.is(d1!.bitsPerHash, d0!.bitsPerHash);
  // Only generations at or above the threshold fold: the eight-bit one is next, then nothing.
  t.true(low.foldCheapest(10) > 0);
  t.is(low.generationShapes()[1]!.bitsPerHash, d0!.bitsPerHash / 2);
  t.is(low.foldCheapest(10), 0);
  t.is(low.cheapestFoldCost(10), Infinity);

  // Near 20 bits a hash the eight-bit generation folds first, as the denser one would.
  const high = entry(40_000, 19, 40_000, 21);
  const [hk, hd] = high.generationShapes();
  t.true(hd!.bitsPerHash > hk!.bitsPerHash, JSON.stringify(high.generationShapes()));
  t.true(high.foldCheapest(10) > 0);
  t.is(high.generationShapes()[0]!.bitsPerHash, hk!.bitsPerHash);
  t.is(high.generationShapes()[1]!.bitsPerHash, hd!.bitsPerHash / 2);
});
