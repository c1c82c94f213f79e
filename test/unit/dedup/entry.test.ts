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
