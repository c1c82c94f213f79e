import test from 'ava';
import { SeedRingEntry, type LocalHit } from '../../../bench/baselines/seedRing/entry.js';
import { BLOCK_BYTES, BLOCK_HASHES } from '../../../bench/baselines/seedRing/constants.js';
import { isSorted } from '../../../bench/baselines/seedRing/hashRecords.js';
import { hashRun } from '../dedup/helpers.js';

test('hydration builds sealed blocks of exactly 4096 and never allocates more than one 64 KiB block, even from one huge row', (t) => {
  const n = 70 * BLOCK_HASHES + 5;
  const hashes = hashRun(1, 0, n);
  const e = SeedRingEntry.hydrate(3600, n - 1, 0, [{ baseOffset: 0, endOffset: n - 1, createdMs: 0, hashes }], 0);
  t.is(e.ring.blockCount, 70);
  t.is(e.ring.hotHashes, 5);
  let buffers = 0;
  for (const b of e.ring.buffers()) {
    buffers++;
    t.true(b.length <= BLOCK_BYTES && b.buffer.byteLength <= BLOCK_BYTES, `buffer of ${b.length} bytes`);
  }
  t.is(buffers, 71);
  for (const blk of e.ring.sealedBlocks()) t.true(blk.hashes.length === BLOCK_BYTES && isSorted(blk.hashes, BLOCK_HASHES));
  for (const a of e.front.arrays()) t.true(a.byteLength <= BLOCK_BYTES, `bloom page of ${a.byteLength} bytes`);
  const hot = e.ring.hotInfo()!;
  t.true(hot.capacity >= 5 && (hot.capacity & (hot.capacity - 1)) === 0, 'hot capacity is a power of two');
  t.true(e.knowsExact(hashes, 0) && e.knowsExact(hashes, (n - 1) * 16) && e.knowsExact(hashes, 12_345 * 16));
});

test('a hydration of one burst splits its window into generations of at most 8 blocks; live appends are tiered by rate again', (t) => {
  // 190 k hashes with one commit time (a bulk load): the rate-aware rule alone would climb to a 262 144-hash generation.
  const n = 190_000;
  const e = SeedRingEntry.hydrate(3600, n - 1, 0, [{ baseOffset: 0, endOffset: n - 1, createdMs: 1000, hashes: hashRun(2, 0, n) }], 1000);
  const spans = Array.from({ length: e.front.generations }, (_, g) => e.front.maxOffsetOf(g) - e.front.minOffsetOf(g) + 1);
  t.true(
    spans.every((s) => s <= 8 * BLOCK_HASHES),
    `generation spans ${spans.join(', ')}`,
  );
  t.true(e.front.generations <= 40, `${e.front.generations} generations`);
  // Afterwards, a burst of live appends (equal commit times) may climb again.
  let base = n;
  for (let i = 0; i < 30; i++) {
    e.append(base, hashRun(3, base, 4096), 4096, 2000);
    base += 4096;
  }
  const last = e.front.generations - 1;
  t.true(e.front.maxOffsetOf(last) - e.front.minOffsetOf(last) + 1 > 8 * BLOCK_HASHES, 'a live generation past 8 blocks');
  // A window too large for 8-block generations within 8K of them takes a larger tier.
  const big = 1_400_000;
  const f = SeedRingEntry.hydrate(
    3600,
    big - 1,
    0,
    [{ baseOffset: 0, endOffset: big - 1, createdMs: 1000, hashes: hashRun(4, 0, big) }],
    1000,
  );
  t.true(f.front.generations <= 40, `${f.front.generations} generations for ${big} hashes`);
});

test('the exact store and the bloom front always receive the same hashes', (t) => {
  const n = 3 * BLOCK_HASHES;
  const hashes = hashRun(2, 0, n);
  const rows = [0, 1, 2].map((i) => ({
    baseOffset: i * BLOCK_HASHES,
    endOffset: (i + 1) * BLOCK_HASHES - 1,
    createdMs: i * 1000,
    hashes: hashes.subarray(i * BLOCK_HASHES * 16, (i + 1) * BLOCK_HASHES * 16),
  }));
  const e = SeedRingEntry.hydrate(60, n - 1, 0, rows, 3000);
  for (let i = 0; i < n; i++) if (!e.bloomMaybe(hashes, i * 16) || !e.knowsExact(hashes, i * 16)) t.fail(`hash ${i}`);
  t.is(e.hashCount, n);
  t.pass();
});

test('local hits name every occurrence through the bloom slots: generations of 8 and of 64 blocks, one hash in several blocks (against a model)', (t) => {
  // A hydrated window (generations of at most 8 blocks, one slot per block),
  // then a burst of live appends with equal commit times (tiers climb: a
  // generation of 64 blocks, 8 per slot). Some hashes recur in other blocks
  // and generations, so a hit's offsets span several slots.
  const hydrated = 70_000;
  const pool = hashRun(11, 0, 5_000);
  const model = new Map<string, number[]>();
  const stream = (first: number, count: number): Buffer => {
    const out = hashRun(12, first, count);
    for (let k = 0; k < count; k++) {
      const o = first + k;
      // Every 37th offset re-uses a pooled hash (pool index from the offset): it recurs across blocks.
      if (o % 37 === 0) pool.copy(out, k * 16, ((o / 37) % 5_000) * 16, ((o / 37) % 5_000) * 16 + 16);
      const key = out.subarray(k * 16, k * 16 + 16).toString('hex');
      model.set(key, [...(model.get(key) ?? []), o]);
    }
    return out;
  };
  const e = SeedRingEntry.hydrate(
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
  const gens = e.front.capacities();
  t.true(gens.includes(32_768) && gens.includes(262_144), `generations ${gens.join(', ')}`);

  const stats = { localHits: 0, localMisses: 0, bloomMaybe: 0, bloomFalsePositives: 0 };
  let checked = 0;
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
    t.true(e.collectHits(items, 200, stats, hits));
    const got = new Map(hits.map((h) => [h.index, h.offsets]));
    for (let k = 0; k < 200; k++) {
      const want = model.get(items.subarray(k * 16, k * 16 + 16).toString('hex')) ?? [];
      const have = got.get(k) ?? [];
      if (want.join() !== [...have].join()) t.fail(`query ${q} item ${k}: want [${want.join()}], got [${[...have].join()}]`);
      checked += want.length;
    }
  }
  t.true(checked > 5_000, `${checked} occurrences checked`);
  t.true(stats.localHits > 0 && stats.localMisses > 0);
});

test('after an expiry drops a part-filled hot buffer, the bloom slots still name the blocks the ring fills next', (t) => {
  // Window 1 s: 500 hashes at t = 0 stay in the hot buffer, an expiry at
  // t = 10 s drops them with it, and the next 8 000 fill a fresh hot buffer
  // from its first record. Numbering the bloom's hashes by count alone (500
  // ahead) would put some in the wrong slot: lookups would miss them.
  const e = SeedRingEntry.hydrate(1, -1, 0, [], 0);
  t.is(e.append(0, hashRun(31, 0, 500), 500, 0), 'appended');
  e.expire(10_000);
  t.is(e.ring.hashCount, 0);
  const n = 8_000;
  const hashes = hashRun(32, 0, n);
  t.is(e.append(500, hashes, n, 10_000), 'appended');
  const stats = { localHits: 0, localMisses: 0, bloomMaybe: 0, bloomFalsePositives: 0 };
  for (let at = 0; at < n; at += 250) {
    const hits: LocalHit[] = [];
    t.true(e.collectHits(hashes.subarray(at * 16, (at + 250) * 16), 250, stats, hits));
    t.deepEqual(
      hits.map((h) => [h.index, [...h.offsets]]),
      Array.from({ length: 250 }, (_, k) => [k, [500 + at + k]]),
    );
    t.true(e.anyLocalHit(hashes.subarray((at + 249) * 16, (at + 250) * 16), 1, stats));
  }
});
