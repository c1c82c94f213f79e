import test from 'ava';
import { PartitionEntry } from '../../../src/dedup/entry.js';
import { BLOCK_BYTES, BLOCK_HASHES } from '../../../src/dedup/constants.js';
import { isSorted } from '../../../src/dedup/hashRecords.js';
import { hashRun } from './helpers.js';

test('hydration builds sealed blocks of exactly 4096 and never allocates more than one 64 KiB block, even from one huge row', (t) => {
  const n = 70 * BLOCK_HASHES + 5;
  const hashes = hashRun(1, 0, n);
  const e = PartitionEntry.hydrate(3600, n - 1, 0, [{ baseOffset: 0, endOffset: n - 1, createdMs: 0, hashes }], 0);
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
  const e = PartitionEntry.hydrate(3600, n - 1, 0, [{ baseOffset: 0, endOffset: n - 1, createdMs: 1000, hashes: hashRun(2, 0, n) }], 1000);
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
  const f = PartitionEntry.hydrate(
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
  const e = PartitionEntry.hydrate(60, n - 1, 0, rows, 3000);
  for (let i = 0; i < n; i++) if (!e.bloomMaybe(hashes, i * 16) || !e.knowsExact(hashes, i * 16)) t.fail(`hash ${i}`);
  t.is(e.hashCount, n);
  t.pass();
});
