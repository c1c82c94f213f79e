import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { gcFunction } from '../../../bench/lib/gc.js';
import { DedupCache } from '../../../src/dedup/index.js';
import { PartitionEntry } from '../../../src/dedup/entry.js';
import { HASH_BYTES } from '../../../src/dedup/constants.js';

/*
 * The budget (QUEEN_DEDUP_CACHE_MB) bounds the broker's memory only if what
 * the cache accounts for an entry is what the entry really holds. These
 * tests build many entries the way the writer does (prepare, admit,
 * install, recordAppend) and compare the accounted bytes with the growth of
 * this thread's V8 heap plus its array buffers, measured after full
 * collections. Small entries are where fixed per-entry costs (objects,
 * typed-array headers, the resident set's bookkeeping) weigh most.
 * Filter entries are measured on their own (the cache builds them only under
 * pressure), without the resident set's few bytes an entry.
 */

const gc = ((): (() => void) => {
  const g = gcFunction();
  if (g === undefined) throw new Error('the accounting tests need gc() (node:v8 could not expose it)');
  return g;
})();

function liveBytes(): number {
  for (let i = 0; i < 3; i++) gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** The accounted bytes are the measured ones within -15 % .. +25 %: the budget neither under- nor over-counts. */
function assertCovers(t: ExecutionContext, entries: number, accounted: number, measured: number): void {
  const ratio = accounted / measured;
  t.log(
    `${entries} entries: accounted ${(accounted / entries).toFixed(0)} B, measured ${(measured / entries).toFixed(0)} B an entry (${ratio.toFixed(2)})`,
  );
  t.true(ratio >= 0.85, `the budget would under-count: accounted ${ratio.toFixed(2)} of the measured bytes`);
  t.true(ratio <= 1.25, `the budget would over-count: accounted ${ratio.toFixed(2)} of the measured bytes`);
}

/** Accounted and measured bytes of `entries` exact entries holding `hashesEach` appended hashes each. */
function measure(entries: number, hashesEach: number): { accounted: number; measured: number } {
  // Allocated before the baseline and kept alive after it: the input is not the cache's.
  const input = randomBytes(Math.max(1, entries * hashesEach) * HASH_BYTES);
  const cache = new DedupCache({ capBytes: 4096 * 2 ** 20, now: () => 1_000_000 });
  const before = liveBytes();
  for (let pid = 1; pid <= entries; pid++) {
    if (cache.prepare(pid, 3600) !== 'hydrate' || !cache.admitRebuild(pid, 0)) throw new Error(`partition ${pid} was not admitted`);
    cache.install(pid, 3600, -1, 0, [], 1_000_000);
    if (hashesEach > 0) {
      const at = (pid - 1) * hashesEach * HASH_BYTES;
      cache.recordAppend(pid, 0, input.subarray(at, at + hashesEach * HASH_BYTES), hashesEach, 1_000_000);
    }
  }
  const measured = liveBytes() - before;
  if (cache.residentPartitions() !== entries || cache.residentHashes() !== entries * hashesEach)
    throw new Error('not every hash is resident');
  const accounted = cache.residentBytes();
  // Both must still be reachable when measured.
  if (input.length === 0 || accounted === 0) throw new Error('unreachable');
  return { accounted, measured };
}

for (const hashesEach of [0, 10, 100, 2000]) {
  test.serial(`accounting covers what entries of ${hashesEach} hashes hold (within -15 % .. +25 %)`, (t) => {
    const entries = hashesEach >= 2000 ? 1_000 : hashesEach >= 100 ? 5_000 : 10_000;
    const { accounted, measured } = measure(entries, hashesEach);
    assertCovers(t, entries, accounted, measured);
  });
}

for (const [hashesEach, blocks] of [
  [0, 1],
  [10, 1],
  [1000, 32],
] as const) {
  test.serial(`accounting covers what filter entries of ${hashesEach} hashes (${blocks} blocks) hold (within -15 % .. +25 %)`, (t) => {
    const entries = hashesEach >= 1000 ? 2_000 : 10_000;
    const input = randomBytes(Math.max(1, entries * hashesEach) * HASH_BYTES);
    const before = liveBytes();
    const kept: PartitionEntry[] = [];
    for (let i = 0; i < entries; i++) {
      const at = i * hashesEach * HASH_BYTES;
      const rows =
        hashesEach === 0
          ? []
          : [{ baseOffset: 0, endOffset: hashesEach - 1, hashes: input.subarray(at, at + hashesEach * HASH_BYTES), createdMs: 1_000_000 }];
      kept.push(PartitionEntry.hydrate(3600, hashesEach - 1, 0, rows, 1_000_000, 'filter', blocks));
    }
    const measured = liveBytes() - before;
    const accounted = kept.reduce((n, e) => n + e.bytes, 0);
    if (input.length === 0 || kept[0]!.tier !== 'filter') throw new Error('not a filter entry');
    assertCovers(t, entries, accounted, measured);
  });
}
