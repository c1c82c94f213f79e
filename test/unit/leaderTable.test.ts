import test from 'ava';
import fc from 'fast-check';
import { LeaderTable } from '../../src/engine/leaderTable.js';

/** Word arrays of n hashes given as 4 words each. */
function wordsOf(hashes: readonly (readonly number[])[]): Uint32Array {
  const w = new Uint32Array(hashes.length * 4);
  hashes.forEach((h, k) => w.set(h, k * 4));
  return w;
}

test('an equal hash in the same partition finds its first holder; a shared first word or another partition stays apart', (t) => {
  const w = wordsOf([
    [7, 1, 2, 3],
    [7, 1, 2, 4], // same first three words, last differs
    [7, 9, 2, 3], // same first word, second differs
    [7, 1, 2, 3], // equal to item 0
    [7, 1, 2, 4], // equal to item 1
    [7, 1, 2, 3], // equal to item 0, other partition
    [7, 1, 2, 3], // equal to item 5, same (other) partition
  ]);
  const table = new LeaderTable(w, 7);
  // Partition ids 65 536 apart start probing at the same slot (any table
  // size up to 2^16), so the partition check is what keeps them apart.
  const p = 65_536;
  t.is(table.findOrAdd(0, p), -1);
  t.is(table.findOrAdd(1, p), -1);
  t.is(table.findOrAdd(2, p), -1);
  t.is(table.findOrAdd(3, p), 0);
  t.is(table.findOrAdd(4, p), 1);
  t.is(table.findOrAdd(5, 2 * p), -1);
  t.is(table.findOrAdd(6, 2 * p), 5);
  t.is(table.count, 4);
  t.throws(() => table.findOrAdd(7, p), { instanceOf: RangeError });
});

test('model: over random hashes with repeats, shared first words and several partitions, each item finds the first item with its partition and 16 bytes', (t) => {
  fc.assert(
    fc.property(
      // Few distinct words, so first-word clashes and full repeats are common.
      fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 3 }), fc.nat(40), fc.integer({ min: 0, max: 3 })), {
        minLength: 1,
        maxLength: 2000,
      }),
      (specs) => {
        const hashes = specs.map(([a, b, c]) => [a * 0x40000000 + 64, b, c, a ^ c]);
        const table = new LeaderTable(wordsOf(hashes), hashes.length);
        const first = new Map<string, number>();
        hashes.forEach((h, k) => {
          // Ids 65 536 apart: the same first probe slot (see above).
          const partition = specs[k]![3] * 65_536;
          const key = `${partition}:${h.join(',')}`;
          const expected = first.get(key) ?? -1;
          if (expected < 0) first.set(key, k);
          if (table.findOrAdd(k, partition) !== expected) throw new Error(`item ${k} (${key}) answered other than ${expected}`);
        });
        return table.count === first.size;
      },
    ),
    { numRuns: 200 },
  );
  t.pass();
});
